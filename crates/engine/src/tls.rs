//! TLS configuration for encrypted data connections (TLS over TCP now, QUIC's handshake too): the
//! server's identity (a self-signed certificate made at start, or one loaded from PEM files), the one
//! cipher suite a test asks for, and a client that trusts exactly the certificate whose SHA-256
//! fingerprint the server announced on the control connection. A measurement tool has no CA to ask, and
//! a pinned fingerprint is stronger than one anyway: the data connections provably reach the server the
//! control connection talks to. The record layer of TLS over TCP is `transport::tcp::tls`, over the
//! traffic keys rustls hands over after the handshake (`enable_secret_extraction`).

use landspeed_core::tls::{CertFingerprint, TlsCipher};
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::{aws_lc_rs, CryptoProvider};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer, ServerName, UnixTime};
use rustls::{ClientConfig, DigitallySignedStruct, ServerConfig, SignatureScheme};
use std::path::Path;
use std::sync::Arc;

/// Why a TLS identity or configuration could not be made.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// The self-signed certificate could not be generated.
    #[error("cannot make a self-signed certificate: {0}")]
    Generate(String),
    /// A PEM file could not be read or held nothing usable.
    #[error("{path}: {detail}")]
    Pem {
        /// The file.
        path: String,
        /// What was wrong.
        detail: String,
    },
    /// rustls refused the configuration (a key that does not match its certificate, say).
    #[error("TLS configuration: {0}")]
    Config(#[from] rustls::Error),
}

/// A server's certificate chain and private key, and the fingerprint clients pin.
pub struct Identity {
    certs: Vec<CertificateDer<'static>>,
    key: PrivateKeyDer<'static>,
    /// SHA-256 of the end-entity certificate.
    pub fingerprint: CertFingerprint,
}

impl std::fmt::Debug for Identity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Identity(sha256:{})", self.fingerprint)
    }
}

impl Identity {
    /// A fresh self-signed certificate (ECDSA P-256) for the name "landspeed".
    pub fn self_signed() -> Result<Identity, TlsError> {
        let ck = rcgen::generate_simple_self_signed(vec!["landspeed".to_string()])
            .map_err(|e| TlsError::Generate(e.to_string()))?;
        let der: CertificateDer<'static> = ck.cert.der().clone();
        let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(ck.signing_key.serialize_der()));
        Ok(Identity {
            fingerprint: CertFingerprint::of_der(&der),
            certs: vec![der],
            key,
        })
    }

    /// A certificate chain (end entity first) and its key, from PEM files.
    pub fn from_pem_files(cert: &Path, key: &Path) -> Result<Identity, TlsError> {
        let pem = |path: &Path, detail: String| TlsError::Pem {
            path: path.display().to_string(),
            detail,
        };
        let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(cert)
            .map_err(|e| pem(cert, e.to_string()))?
            .collect::<Result<_, _>>()
            .map_err(|e| pem(cert, e.to_string()))?;
        let first = certs
            .first()
            .ok_or_else(|| pem(cert, "no CERTIFICATE block".into()))?;
        let fingerprint = CertFingerprint::of_der(first);
        let key = PrivateKeyDer::from_pem_file(key).map_err(|e| pem(key, e.to_string()))?;
        let id = Identity {
            certs,
            key,
            fingerprint,
        };
        id.server_config(&[])?;
        Ok(id)
    }

    /// A TLS 1.3 server configuration offering every suite of [`TlsCipher`] (the client names the
    /// one it wants), with `alpn` protocols if any, and no session tickets (nothing resumes).
    pub fn server_config(&self, alpn: &[&[u8]]) -> Result<Arc<ServerConfig>, TlsError> {
        let mut c = ServerConfig::builder_with_provider(Arc::new(provider(&TlsCipher::ALL)))
            .with_protocol_versions(&[&rustls::version::TLS13])?
            .with_no_client_auth()
            .with_single_cert(self.certs.clone(), self.key.clone_key())?;
        c.alpn_protocols = alpn.iter().map(|a| a.to_vec()).collect();
        c.send_tls13_tickets = 0;
        // TLS over TCP hands the traffic keys to landspeed's own record layer after the handshake.
        c.enable_secret_extraction = true;
        Ok(Arc::new(c))
    }
}

/// What a client trusts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Trust {
    /// Exactly the certificate with this SHA-256 fingerprint.
    Pinned(CertFingerprint),
    /// Any certificate (`--insecure`): for foreign servers whose fingerprint is not announced.
    Any,
}

/// A TLS 1.3 client configuration offering only `suites` (the first is preferred), trusting as
/// `trust` says, with `alpn` protocols if any.
pub fn client_config(
    suites: &[TlsCipher],
    trust: Trust,
    alpn: &[&[u8]],
) -> Result<Arc<ClientConfig>, TlsError> {
    let provider = Arc::new(provider(suites));
    let verifier = Arc::new(Verifier {
        trust,
        algorithms: provider.signature_verification_algorithms,
    });
    let mut c = ClientConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13])?
        .dangerous()
        .with_custom_certificate_verifier(verifier)
        .with_no_client_auth();
    c.alpn_protocols = alpn.iter().map(|a| a.to_vec()).collect();
    c.resumption = rustls::client::Resumption::disabled();
    c.enable_secret_extraction = true;
    // The session secrets go to the file SSLKEYLOGFILE names, when it names one (as curl's and the
    // browsers' do), so a capture of the test can be read with Wireshark or bench/h2-wire.
    c.key_log = Arc::new(rustls::KeyLogFile::new());
    Ok(Arc::new(c))
}

/// The name a client sends (SNI); landspeed's own servers ignore it.
pub fn server_name() -> ServerName<'static> {
    ServerName::try_from("landspeed").expect("a valid DNS name")
}

/// aws-lc-rs with only `suites`, in that order.
fn provider(suites: &[TlsCipher]) -> CryptoProvider {
    use aws_lc_rs::cipher_suite as cs;
    let base = aws_lc_rs::default_provider();
    CryptoProvider {
        cipher_suites: suites
            .iter()
            .map(|s| match s {
                TlsCipher::Aes128Gcm => cs::TLS13_AES_128_GCM_SHA256,
                TlsCipher::Aes256Gcm => cs::TLS13_AES_256_GCM_SHA384,
                TlsCipher::Chacha20Poly1305 => cs::TLS13_CHACHA20_POLY1305_SHA256,
            })
            .collect(),
        ..base
    }
}

/// Checks the server's certificate against the pinned fingerprint; the handshake's signatures are
/// still verified (they prove the server holds the certificate's key).
#[derive(Debug)]
struct Verifier {
    trust: Trust,
    algorithms: rustls::crypto::WebPkiSupportedAlgorithms,
}

impl ServerCertVerifier for Verifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        match self.trust {
            Trust::Any => Ok(ServerCertVerified::assertion()),
            Trust::Pinned(want) => {
                let got = CertFingerprint::of_der(end_entity);
                if got == want {
                    Ok(ServerCertVerified::assertion())
                } else {
                    Err(rustls::Error::General(format!(
                        "the server's certificate has fingerprint {got}, not the pinned {want}"
                    )))
                }
            }
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.algorithms.supported_schemes()
    }
}

/// Why kernel TLS (`--ktls`) cannot be used on this host, in words; None when the kernel has it.
///
/// Probed the way the offload would start: `setsockopt(TCP_ULP, "tls")` on a fresh TCP socket fails
/// with ENOENT when the kernel has no TLS upper-layer protocol (built without CONFIG_TLS, or the `tls`
/// module not loaded and this process not allowed to load it), and with ENOTCONN when it has one (the
/// socket is not connected yet).
pub fn ktls_unavailable_reason() -> Option<String> {
    crate::os::ktls_unavailable_reason()
}

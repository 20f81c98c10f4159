//! The typed control messages. Each is one JSON object with a `type` tag; unknown fields are ignored so a
//! newer peer can add information without breaking an older one, while a change of meaning bumps
//! `PROTOCOL_VERSION`.

use landspeed_core::config::TestSpec;
use landspeed_core::endpoint::{EndpointReport, IntervalSample};
use serde::{Deserialize, Serialize};

pub use landspeed_core::session_id::SessionId;

/// What kind of refusal a `Rejected` is: a client decides whether to retry by this, never by the text.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Refusal {
    /// The server is at a capacity limit (tests at once, connections greeting): retrying later can work.
    Busy,
    /// Too many new tests from this address this minute: retrying after a minute can work.
    RateLimited,
    /// This address may not run tests here (`--allow`).
    NotAllowed,
    /// Authentication failed or was missing.
    Authentication,
    /// The request exceeds one of the server's advertised limits.
    OverLimit,
    /// The request itself is invalid (or names a file the server cannot serve).
    Invalid,
    /// Third-party orders are not taken here.
    NoControl,
    /// A refusal from a peer that sends no code.
    #[default]
    #[serde(other)]
    Other,
}

impl Refusal {
    /// A later attempt can succeed without changing the request.
    pub fn is_transient(self) -> bool {
        matches!(self, Refusal::Busy | Refusal::RateLimited)
    }
}

/// A control message. Client-to-server and server-to-client messages share one type; the session state
/// machines reject a message that arrives in the wrong direction or at the wrong time.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Message {
    /// Client, first message.
    Hello {
        /// The protocol version the client speaks.
        version: u16,
        /// The client's software and version.
        software: String,
        /// The key the client holds, with its nonce: from the welcome on, the conversation is sealed.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        auth: Option<super::auth::HelloAuth>,
    },
    /// Server's answer to `Hello`, with the limits it puts on a test.
    Welcome {
        /// The protocol version the server speaks.
        version: u16,
        /// The server's software and version.
        software: String,
        /// What a test on this server may ask for.
        #[serde(default)]
        limits: super::Limits,
        /// Present when the server requires authentication (`--auth-keys`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        auth: Option<super::auth::Challenge>,
        /// The server takes third-party orders from authorised controllers (`--allow-control`).
        #[serde(default)]
        control: bool,
    },
    /// Client: the test it wants, with its answer to the server's challenge when there was one.
    TestRequest {
        /// The test.
        spec: Box<TestSpec>,
        /// A version-1 client's answer to the challenge (this build sends none; a server refuses it).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        auth: Option<Box<super::auth::Proof>>,
    },
    /// Server: the test is accepted; open the data streams quoting this id.
    Accepted {
        /// The id the data streams quote.
        session: SessionId,
        /// The SHA-256 fingerprint of the certificate the server's encrypted data connections
        /// (`--tls`) present: the client pins them to it. Absent for unencrypted tests.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        certificate: Option<landspeed_core::tls::CertFingerprint>,
        /// QUIC tests: the UDP port of the server's QUIC endpoint.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        quic_port: Option<u16>,
    },
    /// Server: the test is refused, why (for people), and what kind of refusal (for programs: whether
    /// a retry can work). Older peers send no code: `other`.
    Rejected {
        /// Why, for people.
        reason: String,
        /// What kind of refusal, for programs.
        #[serde(default)]
        code: Refusal,
    },
    /// Server: every data stream has arrived and is configured.
    Ready,
    /// Client: start moving data now.
    Start,
    /// Client: stop sending early (the user interrupted); the test still ends cleanly.
    Stop,
    /// Server: a sample of its streams, sent as each interval closes.
    Interval {
        /// The server's streams at the interval's end.
        sample: IntervalSample,
    },
    /// Server: all its streams have finished.
    Done,
    /// Each end's final report: the client sends first, the server answers with its own.
    Results {
        /// The end's report.
        report: Box<EndpointReport>,
    },
    /// Either end: the test failed; the message says why.
    Error {
        /// Why.
        message: String,
    },
    /// Controller: the time on its clock (ns since the Unix epoch); the server answers with `Clock`.
    ClockProbe {
        /// The controller's clock, ns since the Unix epoch.
        client_ns: u64,
    },
    /// Server: the probe's time echoed with its own clock's reading.
    Clock {
        /// The probe's time, echoed.
        client_ns: u64,
        /// The server's clock when it answered, ns since the Unix epoch.
        server_ns: u64,
    },
    /// Controller: run this test from the server to another one (third-party mode).
    ControlRequest {
        /// The test and the host to run it to.
        order: Box<super::control::ControlOrder>,
        /// A version-1 controller's answer to the challenge (this build sends none).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        auth: Option<Box<super::auth::Proof>>,
    },
    /// Server: the result of the ordered test.
    ControlResult {
        /// The ordered test's result.
        result: Box<landspeed_core::result::RunResult>,
    },
}

impl Message {
    /// The message's tag, for errors and logs.
    pub fn kind(&self) -> &'static str {
        match self {
            Message::Hello { .. } => "hello",
            Message::Welcome { .. } => "welcome",
            Message::TestRequest { .. } => "test_request",
            Message::Accepted { .. } => "accepted",
            Message::Rejected { .. } => "rejected",
            Message::Ready => "ready",
            Message::Start => "start",
            Message::Stop => "stop",
            Message::Interval { .. } => "interval",
            Message::Done => "done",
            Message::Results { .. } => "results",
            Message::Error { .. } => "error",
            Message::ClockProbe { .. } => "clock_probe",
            Message::Clock { .. } => "clock",
            Message::ControlRequest { .. } => "control_request",
            Message::ControlResult { .. } => "control_result",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn session_id_round_trips() {
        let id = SessionId([0xab; 16]);
        let s = id.to_string();
        assert_eq!(s.len(), 32);
        assert_eq!(s.parse::<SessionId>().unwrap(), id);
        assert!("zz".parse::<SessionId>().is_err());
        assert!("é".repeat(16).parse::<SessionId>().is_err());
    }

    #[test]
    fn messages_have_a_type_tag() {
        let j = serde_json::to_string(&Message::Start).unwrap();
        assert_eq!(j, r#"{"type":"start"}"#);
        let m: Message = serde_json::from_str(r#"{"type":"rejected","reason":"busy","extra":1}"#).unwrap();
        assert_eq!(
            m,
            Message::Rejected {
                reason: "busy".into(),
                code: Refusal::Other,
            }
        );
    }
}

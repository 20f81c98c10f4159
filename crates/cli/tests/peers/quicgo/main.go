// A small QUIC performance-protocol peer (draft-banks-quic-performance, ALPN "perf") on quic-go, a
// QUIC stack nobody on the landspeed team wrote: the interop tests run landspeed's perf client
// against its server and its client against landspeed's server.
//
//	quicgo server PORT               prints "listening PORT", serves until killed
//	quicgo client HOST:PORT UP DOWN  one bidirectional request: DOWN bytes asked for, UP bytes
//	                                 uploaded; prints one JSON line and exits
//
// The server makes a self-signed certificate at start and answers with zero bytes, as quic-go's own
// perf tool does; the client does not check the server's certificate.
package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"math/big"
	"os"
	"strconv"
	"time"

	"github.com/quic-go/quic-go"
)

const chunk = 64 * 1024

var config = &quic.Config{
	MaxIdleTimeout:                 30 * time.Second,
	InitialStreamReceiveWindow:     8 << 20,
	MaxStreamReceiveWindow:         64 << 20,
	InitialConnectionReceiveWindow: 16 << 20,
	MaxConnectionReceiveWindow:     128 << 20,
}

func main() {
	args := os.Args[1:]
	var err error
	switch {
	case len(args) == 2 && args[0] == "server":
		err = server(args[1])
	case len(args) == 4 && args[0] == "client":
		err = client(args[1], args[2], args[3])
	default:
		err = fmt.Errorf("usage: quicgo server PORT | quicgo client HOST:PORT UP DOWN")
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func selfSigned() (tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, err
	}
	tmpl := x509.Certificate{
		SerialNumber: big.NewInt(1),
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		DNSNames:     []string{"localhost"},
	}
	der, err := x509.CreateCertificate(rand.Reader, &tmpl, &tmpl, &key.PublicKey, key)
	if err != nil {
		return tls.Certificate{}, err
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, nil
}

func server(port string) error {
	cert, err := selfSigned()
	if err != nil {
		return err
	}
	tlsConf := &tls.Config{Certificates: []tls.Certificate{cert}, NextProtos: []string{"perf"}}
	ln, err := quic.ListenAddr("127.0.0.1:"+port, tlsConf, config)
	if err != nil {
		return err
	}
	fmt.Printf("listening %s\n", port)
	for {
		conn, err := ln.Accept(context.Background())
		if err != nil {
			return err
		}
		go serveConn(conn)
	}
}

func serveConn(conn *quic.Conn) {
	for {
		s, err := conn.AcceptStream(context.Background())
		if err != nil {
			return
		}
		go serveStream(s)
	}
}

// serveStream reads the size, drains the upload to FIN, then sends that many bytes and FIN.
func serveStream(s *quic.Stream) {
	var head [8]byte
	if _, err := io.ReadFull(s, head[:]); err != nil {
		s.CancelRead(0)
		s.Close()
		return
	}
	if _, err := io.Copy(io.Discard, s); err != nil {
		return
	}
	left := binary.BigEndian.Uint64(head[:])
	buf := make([]byte, chunk)
	for left > 0 {
		n := uint64(len(buf))
		if left < n {
			n = left
		}
		if _, err := s.Write(buf[:n]); err != nil {
			return
		}
		left -= n
	}
	s.Close()
}

func client(addr, upArg, downArg string) error {
	up, err := strconv.ParseUint(upArg, 10, 64)
	if err != nil {
		return err
	}
	down, err := strconv.ParseUint(downArg, 10, 64)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	tlsConf := &tls.Config{InsecureSkipVerify: true, NextProtos: []string{"perf"}}
	conn, err := quic.DialAddr(ctx, addr, tlsConf, config)
	if err != nil {
		return err
	}
	defer conn.CloseWithError(0, "done")
	s, err := conn.OpenStreamSync(ctx)
	if err != nil {
		return err
	}
	start := time.Now()
	var head [8]byte
	binary.BigEndian.PutUint64(head[:], down)
	if _, err := s.Write(head[:]); err != nil {
		return err
	}
	buf := make([]byte, chunk)
	for left := up; left > 0; {
		n := uint64(len(buf))
		if left < n {
			n = left
		}
		if _, err := s.Write(buf[:n]); err != nil {
			return err
		}
		left -= n
	}
	s.Close()
	got, err := io.Copy(io.Discard, s)
	if err != nil {
		return err
	}
	out, _ := json.Marshal(map[string]any{"uploaded": up, "downloaded": got, "seconds": time.Since(start).Seconds()})
	fmt.Println(string(out))
	return nil
}

// A driver for M-Lab's ndt7-client-go library: both subtests against one server (ws or wss, the
// server's certificate not checked), each subtest's last client and server measurement as JSON.
package main

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"os"
	"time"

	"github.com/m-lab/ndt7-client-go"
)

func main() {
	c := ndt7.NewClient("landspeed-interop-go", "1")
	c.Server = os.Args[1]
	c.Scheme = os.Args[2]
	c.Dialer.TLSClientConfig = &tls.Config{InsecureSkipVerify: true}
	out := map[string]interface{}{}
	for _, kind := range []string{"download", "upload"} {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		start := c.StartDownload
		if kind == "upload" {
			start = c.StartUpload
		}
		ch, err := start(ctx)
		if err != nil {
			fmt.Fprintln(os.Stderr, kind, err)
			os.Exit(1)
		}
		n := 0
		for range ch {
			n++
		}
		cancel()
		out[kind+"_measurements"] = n
	}
	out["results"] = c.Results()
	b, _ := json.Marshal(out)
	fmt.Println(string(b))
}

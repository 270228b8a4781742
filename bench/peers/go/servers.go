// Servers of bench/run.py's server groups (bench/peers/README.md, "Server groups"):
//
//	peer --serve <kind> <method>    listens on 127.0.0.1 (a port the kernel picks), prints
//	                                "listening on 127.0.0.1:PORT" and serves until killed
//
// bench/loadgen (echo, sync_over_async_server) or wrk (plaintext) is the client.
package main

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"time"
)

// A request of the sync_over_async_server group: a fixed-size message echoed back; one whose
// first byte is 'B' is answered only after the handler has waited blockingHandlerWait.
const (
	framedMessageSize   = 64
	blockingHandlerWait = 100 * time.Millisecond
)

type server struct {
	kind, name string
	serve      func(net.Listener) error
}

// acceptLoop runs handle in a goroutine per connection, as a Go server does.
func acceptLoop(ln net.Listener, handle func(net.Conn)) error {
	for {
		c, err := ln.Accept()
		if err != nil {
			return err
		}
		go func() {
			defer c.Close()
			handle(c)
		}()
	}
}

func echoConn(c net.Conn) {
	buf := make([]byte, 4096)
	for {
		n, err := c.Read(buf)
		if err != nil {
			return
		}
		if _, err := c.Write(buf[:n]); err != nil {
			return
		}
	}
}

// blockingEchoConn blocks its goroutine on a timer's channel for a 'B' message: the Go form of
// a handler that waits synchronously for unfinished work (the runtime parks the goroutine, not a
// thread).
func blockingEchoConn(c net.Conn) {
	buf := make([]byte, framedMessageSize)
	for {
		if _, err := io.ReadFull(c, buf); err != nil {
			return
		}
		if buf[0] == 'B' {
			<-time.After(blockingHandlerWait)
		}
		if _, err := c.Write(buf); err != nil {
			return
		}
	}
}

var helloWorld = []byte("Hello, World!")

func plaintext(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain")
	w.Header().Set("Server", "Go")
	_, _ = w.Write(helloWorld)
}

var (
	rawHello     = []byte("HTTP/1.1 200 OK\r\nServer: Go\r\nContent-Type: text/plain\r\nContent-Length: 13\r\n\r\nHello, World!")
	endOfHeaders = []byte("\r\n\r\n")
)

// rawHTTPConn is HTTP/1.1 on a bare net.Conn with a minimal parser, as the Asio and C# peers
// have it: every request ends at its empty line (GET, no body) and is answered "Hello, World!";
// the answers to the complete requests that one read brought in go out in one write (pipelining),
// and a request cut by the end of a read waits for the next.
func rawHTTPConn(c net.Conn) {
	in := make([]byte, 4096)
	out := make([]byte, 0, 16*len(rawHello))
	have := 0 // bytes of in received and not yet parsed
	for {
		if have == len(in) { // one request longer than the buffer: grow it
			in = append(in, make([]byte, len(in))...)
		}
		n, err := c.Read(in[have:])
		if err != nil {
			return
		}
		have += n
		begin := 0
		for {
			end := bytes.Index(in[begin:have], endOfHeaders)
			if end < 0 {
				break
			}
			out = append(out, rawHello...)
			begin += end + len(endOfHeaders)
		}
		have = copy(in, in[begin:have])
		if len(out) > 0 {
			if _, err := c.Write(out); err != nil {
				return
			}
			out = out[:0]
		}
	}
}

var servers = []server{
	{kind: "echo", name: "goroutine per connection (net)", serve: func(ln net.Listener) error { return acceptLoop(ln, echoConn) }},
	{kind: "plaintext", name: "net/http", serve: func(ln net.Listener) error {
		mux := http.NewServeMux()
		mux.HandleFunc("/plaintext", plaintext)
		return http.Serve(ln, mux)
	}},
	{kind: "plaintext", name: "raw net.Conn, goroutine per connection, minimal parser", serve: func(ln net.Listener) error {
		return acceptLoop(ln, rawHTTPConn)
	}},
	{kind: "sync_over_async_server", name: "goroutine per connection, <-time.After(100 ms)", serve: func(ln net.Listener) error {
		return acceptLoop(ln, blockingEchoConn)
	}},
}

func serve(kind, name string) {
	for _, s := range servers {
		if s.kind != kind || s.name != name {
			continue
		}
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			fmt.Fprintf(os.Stderr, "listen: %v\n", err)
			os.Exit(1)
		}
		fmt.Printf("listening on %s\n", ln.Addr())
		if err := s.serve(ln); err != nil {
			fmt.Fprintf(os.Stderr, "serve: %v\n", err)
			os.Exit(1)
		}
		return
	}
	fmt.Fprintf(os.Stderr, "no server %q / %q\n", kind, name)
	os.Exit(2)
}

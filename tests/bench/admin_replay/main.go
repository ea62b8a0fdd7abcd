// admin_replay: a Flyte Admin for the scale benchmark that costs, per call, what a Go server
// costs (flyteadmin is written in Go), not what the Python sandbox servicer costs.
//
// It replays the answers the sandbox Admin gave one scan of the same month, keyed by (method,
// request bytes), after a fixed latency: gRPC over cleartext HTTP/2 (prior knowledge, as
// grpcio's insecure channel speaks it) with the Go standard library only, so `go build` needs
// no module download. A request it has no answer for is UNAVAILABLE, which the scan reports as
// a gap: a replay that does not match the scan cannot pass for a complete one.
//
// Usage: admin_replay -records FILE -latency 5ms. It prints "HOST:PORT ANSWERS" once it
// listens; each line read on stdin is answered with the calls so far, "MISSES SLEPT_US
// METHOD=N ..." (SLEPT_US: the latency applied, summed over the calls, in microseconds);
// stdin's end stops it.
//
// FILE: records of (method, request, status code, answer or status message), each field
// length-prefixed (uint32, little-endian), as tests/bench/bench_scan.py writes them.
package main

import (
	"bufio"
	"encoding/binary"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path"
	"strconv"
	"strings"
	"sync"
	"time"
)

type answer struct {
	code    uint32 // a gRPC status code: 0 for OK
	payload []byte // the serialized answer, or the status message
}

func field(r *bufio.Reader) ([]byte, error) {
	var n uint32
	if err := binary.Read(r, binary.LittleEndian, &n); err != nil {
		return nil, err
	}
	b := make([]byte, n)
	_, err := io.ReadFull(r, b)
	return b, err
}

func load(path string) (map[string]answer, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	r := bufio.NewReader(f)
	answers := map[string]answer{}
	for {
		method, err := field(r)
		if err == io.EOF {
			return answers, nil
		}
		if err != nil {
			return nil, err
		}
		req, err := field(r)
		if err != nil {
			return nil, err
		}
		var code uint32
		if err := binary.Read(r, binary.LittleEndian, &code); err != nil {
			return nil, err
		}
		payload, err := field(r)
		if err != nil {
			return nil, err
		}
		answers[string(method)+"\x00"+string(req)] = answer{code, payload}
	}
}

func main() {
	records := flag.String("records", "", "the recorded answers")
	latency := flag.Duration("latency", 5*time.Millisecond, "added to every call")
	addr := flag.String("addr", "127.0.0.1:0", "where to listen")
	flag.Parse()
	answers, err := load(*records)
	if err != nil {
		fmt.Fprintln(os.Stderr, "admin_replay:", err)
		os.Exit(2)
	}
	var mu sync.Mutex
	calls, misses := map[string]int{}, 0
	var slept time.Duration // the latency applied, summed over the calls
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		// A unary call's body is one message: a compression flag (0), a length, the bytes.
		if err != nil || len(body) < 5 || body[0] != 0 {
			http.Error(w, "not a uncompressed unary gRPC call", http.StatusBadRequest)
			return
		}
		start := time.Now()
		sleep(*latency)
		waited := time.Since(start)
		a, ok := answers[r.URL.Path+"\x00"+string(body[5:])]
		mu.Lock()
		calls[path.Base(r.URL.Path)]++
		slept += waited
		if !ok {
			misses++
		}
		mu.Unlock()
		if !ok {
			a = answer{14, []byte("admin_replay: no recorded answer for this request")} // UNAVAILABLE
		}
		h := w.Header()
		h.Set("Content-Type", "application/grpc")
		h.Set("Trailer", "Grpc-Status, Grpc-Message")
		w.WriteHeader(http.StatusOK)
		if a.code == 0 {
			frame := make([]byte, 5, 5+len(a.payload))
			binary.BigEndian.PutUint32(frame[1:], uint32(len(a.payload)))
			w.Write(append(frame, a.payload...))
			h.Set("Grpc-Status", "0")
			return
		}
		h.Set("Grpc-Status", strconv.Itoa(int(a.code)))
		h.Set("Grpc-Message", url.PathEscape(string(a.payload)))
	})
	lis, err := net.Listen("tcp", *addr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "admin_replay:", err)
		os.Exit(2)
	}
	var protocols http.Protocols
	protocols.SetUnencryptedHTTP2(true)
	server := &http.Server{Handler: handler, Protocols: &protocols}
	fmt.Printf("%s %d\n", lis.Addr(), len(answers))
	go func() {
		in := bufio.NewScanner(os.Stdin)
		for in.Scan() {
			mu.Lock()
			line := []string{strconv.Itoa(misses), strconv.FormatInt(slept.Microseconds(), 10)}
			for method, n := range calls {
				line = append(line, fmt.Sprintf("%s=%d", method, n))
			}
			mu.Unlock()
			fmt.Println(strings.Join(line, " "))
		}
		os.Exit(0)
	}()
	server.Serve(lis)
}

// Command bare is the baseline of the API benchmark: a plain net/http
// server that answers every request with the bytes of one file, as JSON.
// Whatever dmarcd adds (routing, auth, rate limiting, storage, encoding,
// logging, metrics) is the difference between the two.
package main

import (
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"strconv"
)

func main() {
	body := flag.String("body", "", "file whose bytes every response carries")
	listen := flag.String("listen", "127.0.0.1:0", "address to listen on")
	flag.Parse()
	b, err := os.ReadFile(*body)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bare:", err)
		os.Exit(2)
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bare:", err)
		os.Exit(2)
	}
	fmt.Println(ln.Addr().String())
	n := strconv.Itoa(len(b))
	_ = http.Serve(ln, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Length", n)
		_, _ = w.Write(b)
	}))
}

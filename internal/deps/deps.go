// Package deps keeps the modules chosen for the coming intake work
// (go-smtp, go-message, x/text, x/sync) in go.mod until packages import
// them; delete it then.
package deps

import (
	_ "github.com/emersion/go-message"
	_ "github.com/emersion/go-smtp"
	_ "github.com/julienschmidt/httprouter"
	_ "github.com/miekg/dns"
	_ "github.com/oschwald/maxminddb-golang/v2"
	_ "github.com/spf13/cobra"
	_ "go.etcd.io/bbolt"
	_ "golang.org/x/net/idna"
	_ "golang.org/x/net/publicsuffix"
	_ "golang.org/x/sync/errgroup"
	_ "golang.org/x/text/encoding/htmlindex"
)

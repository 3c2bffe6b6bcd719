package deps
import (
 _ "go.etcd.io/bbolt"
 _ "github.com/julienschmidt/httprouter"
 _ "github.com/miekg/dns"
 _ "github.com/oschwald/maxminddb-golang/v2"
 _ "github.com/spf13/cobra"
 _ "golang.org/x/net/idna"
 _ "golang.org/x/net/publicsuffix"
 _ "github.com/emersion/go-smtp"
 _ "github.com/emersion/go-message"
 _ "golang.org/x/text/encoding/htmlindex"
 _ "golang.org/x/sync/errgroup"
)


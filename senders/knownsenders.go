package senders

import (
	"bufio"
	"bytes"
	_ "embed"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"golang.org/x/net/publicsuffix"
)

// The known-sender map is parsedmarc's base_reverse_dns_map.csv (see
// knownsenders/README.md for its source and licence), embedded.
var (
	//go:embed knownsenders/base_reverse_dns_map.csv
	embeddedMap []byte
	//go:embed knownsenders/psl_overrides.txt
	embeddedOverrides []byte
)

// Sender names who sends from a base domain: an organization or service
// and its type ("Email Provider", "Marketing", "ISP", ...).
type Sender struct {
	Name string `json:"name"`
	Type string `json:"type"`
}

// networkTypes are the map's types of networks that carry anyone's mail
// (access and hosting providers): they name a group, but mail from them is
// not authorized by the name alone, since spoofers send from them too.
var networkTypes = map[string]bool{"ISP": true, "Web Host": true, "IaaS": true, "PaaS": true, "MSP": true}

// IsService reports whether s is a sending service (an email provider, a
// marketing or SaaS platform, ...) rather than a network anyone can send
// from: only services authorize mail by their name.
func (s Sender) IsService() bool { return !networkTypes[s.Type] }

// KnownSenders maps base domains to senders and computes base domains. It
// is read-only once built, so safe for concurrent use.
type KnownSenders struct {
	byBase    map[string]Sender
	overrides []string // psl_overrides.txt lines, lower case
}

// DefaultKnownSenders returns the embedded map.
func DefaultKnownSenders() *KnownSenders {
	k, err := parseKnownSenders(embeddedMap, embeddedOverrides)
	if err != nil {
		panic("senders: embedded known-sender map: " + err.Error())
	}
	return k
}

func parseKnownSenders(csvData, overrides []byte) (*KnownSenders, error) {
	k := &KnownSenders{byBase: map[string]Sender{}}
	if err := k.addCSV(bytes.NewReader(csvData)); err != nil {
		return nil, err
	}
	sc := bufio.NewScanner(bytes.NewReader(overrides))
	for sc.Scan() {
		if line := strings.ToLower(strings.TrimSpace(sc.Text())); line != "" && !strings.HasPrefix(line, "#") {
			k.overrides = append(k.overrides, line)
		}
	}
	return k, sc.Err()
}

// WithFile returns a copy of k with the rows of the CSV file at path
// (base_reverse_dns,name,type, header optional) added or replacing those
// of the same base domain (--sender-map). A malformed file is an error
// naming its line; k is unchanged.
func (k *KnownSenders) WithFile(path string) (*KnownSenders, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("sender map: %w", err)
	}
	defer f.Close()
	out := &KnownSenders{byBase: make(map[string]Sender, len(k.byBase)), overrides: k.overrides}
	for b, s := range k.byBase {
		out.byBase[b] = s
	}
	if err := out.addCSV(f); err != nil {
		return nil, fmt.Errorf("sender map %s: %w", path, err)
	}
	return out, nil
}

// addCSV reads base_reverse_dns,name,type rows; a first row naming
// base_reverse_dns is a header.
func (k *KnownSenders) addCSV(r io.Reader) error {
	cr := csv.NewReader(r)
	cr.FieldsPerRecord = 3
	cr.TrimLeadingSpace = true
	for first := true; ; first = false {
		rec, err := cr.Read()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		base := strings.ToLower(strings.TrimSuffix(strings.TrimSpace(rec[0]), "."))
		if first && base == "base_reverse_dns" {
			continue
		}
		line, _ := cr.FieldPos(0)
		if base == "" || strings.ContainsAny(base, " /@") || strings.TrimSpace(rec[1]) == "" {
			return fmt.Errorf("line %d: needs a base domain and a name", line)
		}
		k.byBase[base] = Sender{Name: strings.TrimSpace(rec[1]), Type: strings.TrimSpace(rec[2])}
	}
}

// Len returns how many base domains the map knows.
func (k *KnownSenders) Len() int { return len(k.byBase) }

// Lookup returns the sender of a base domain.
func (k *KnownSenders) Lookup(base string) (Sender, bool) {
	s, ok := k.byBase[base]
	return s, ok
}

// BaseDomain returns the registrable domain of a host name, by the public
// suffix list with the map's overrides (a name ending in an override has
// the override, without its leading "." or "-", as its base). It returns
// "" for an empty name and the name itself when it has no public suffix
// above it.
func (k *KnownSenders) BaseDomain(host string) string {
	host = strings.ToLower(strings.TrimSuffix(strings.TrimSpace(host), "."))
	if host == "" {
		return ""
	}
	for _, o := range k.overrides {
		switch {
		case o[0] == '.' || o[0] == '-':
			if strings.HasSuffix(host, o) || host == o[1:] {
				return o[1:]
			}
		case host == o || strings.HasSuffix(host, "."+o):
			return o
		}
	}
	base, err := publicsuffix.EffectiveTLDPlusOne(host)
	if err != nil {
		return host
	}
	return base
}

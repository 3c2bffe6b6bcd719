package cli

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/dmarcd/dmarcd/webhook"
	"github.com/dmarcd/dmarcd/webhook/verify"
)

// maxVerifyBody bounds what webhook verify reads from stdin; deliveries are
// a few KiB.
const maxVerifyBody = 16 << 20

func newWebhookCommand(g *globalOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "webhook",
		Short: "Tools for webhook receivers",
		Long: `dmarcd sends every alert.created event as a signed HTTPS POST to the
organization's webhooks. 'dmarcd webhook verify' checks such a delivery the
way a receiver must, to debug a receiver or a captured request.`,
	}
	cmd.AddCommand(newWebhookVerifyCommand(g))
	return cmd
}

type webhookVerifyOptions struct {
	Secret, Timestamp, Signature string
	Now                          int64 // Unix seconds; 0 means the clock
}

func newWebhookVerifyCommand(g *globalOptions) *cobra.Command {
	var o webhookVerifyOptions
	cmd := &cobra.Command{
		Use:   "verify --secret S --timestamp T --signature SIG < BODY",
		Short: "Check the signature and age of a webhook delivery",
		Long: `Check a webhook delivery by the five rules every receiver must follow:

  1. X-Webhook-Timestamp must be within 300 s of now, either way;
  2. the timestamp must be present and the signature must start "sha256=";
  3. the signature is recomputed over the raw body bytes, exactly as received;
  4. the two signatures are compared in constant time;
  5. only then is the body parsed.

What is signed is the timestamp, a dot and the raw body:
  X-Webhook-Signature = "sha256=" + hex(HMAC-SHA256(secret, "<X-Webhook-Timestamp>.<body>"))
The secret is the whsec_... value shown once when the webhook was created,
used whole, prefix included.

Pass the raw body on standard input, byte for byte: re-encoding the JSON or
adding a newline (echo and here-documents do) changes the signature.
--signature takes the header value (sha256=...) or the bare hex. The secret
may come from the environment variable DMARCD_SECRET instead of --secret,
which keeps it out of the shell history and the process list.

When the check fails, the reason is printed, and also what would have
passed: whether the signature matches despite a stale timestamp, and the
signature expected for this body.

Exit codes:
  0  the delivery is genuine and fresh
  1  it is not (the reason is printed; with --json also on stdout)
  2  the command was called wrongly`,
		Example: `  # Check a delivery captured by your receiver (headers logged, body saved raw):
  dmarcd webhook verify --secret "$WHSEC" --timestamp 1767225600 \
      --signature sha256=7d3c...e1 < body.json

  # Compute the same signature with openssl, to compare with your receiver's:
  ts=$(date +%s)
  { printf '%s.' "$ts"; cat body.json; } | openssl dgst -sha256 -hmac "$WHSEC"

  # Send a correctly signed request to your receiver with curl:
  sig=$({ printf '%s.' "$ts"; cat body.json; } | openssl dgst -sha256 -hmac "$WHSEC" | sed 's/^.*= //')
  curl -H 'Content-Type: application/json' -H "X-Webhook-Timestamp: $ts" \
      -H "X-Webhook-Signature: sha256=$sig" --data-binary @body.json https://hooks.example.com/dmarc`,
		Args: exactArgs(0, "no arguments (the body comes on standard input)"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runWebhookVerify(g, o, cmd.InOrStdin())
		},
	}
	cmd.Flags().StringVar(&o.Secret, "secret", "", "the webhook's signing secret, whsec_... (required; env DMARCD_SECRET)")
	cmd.Flags().StringVar(&o.Timestamp, "timestamp", "", "the X-Webhook-Timestamp header value (required)")
	cmd.Flags().StringVar(&o.Signature, "signature", "", "the X-Webhook-Signature header value, sha256=<hex> or bare hex (required)")
	cmd.Flags().Int64Var(&o.Now, "now", 0, "check as if the time were these Unix seconds (for tests)")
	_ = cmd.Flags().MarkHidden("now")
	requireFlags(cmd, "secret", "timestamp", "signature")
	return cmd
}

// verifyResult is the --json output of webhook verify.
type verifyResult struct {
	Valid  bool    `json:"valid"`
	Reason *string `json:"reason"` // null when valid
	// AgeSeconds is now minus the timestamp (negative: from the future);
	// null when the timestamp is unreadable.
	AgeSeconds *int64 `json:"age_seconds"`
	// SignatureMatches says whether the signature fits the body and
	// timestamp, judged even when the timestamp is out of range; null when
	// the headers are malformed.
	SignatureMatches *bool `json:"signature_matches"`
	// ExpectedSignature is the right signature for this body and timestamp,
	// given when the one passed does not match.
	ExpectedSignature *string `json:"expected_signature"`
}

func runWebhookVerify(g *globalOptions, o webhookVerifyOptions, stdin io.Reader) error {
	if f, ok := stdin.(*os.File); ok {
		if st, err := f.Stat(); err == nil && st.Mode()&os.ModeCharDevice != 0 {
			return usagef("pass the raw delivery body on standard input, e.g. dmarcd webhook verify ... < body.json")
		}
	}
	body, err := io.ReadAll(io.LimitReader(stdin, maxVerifyBody+1))
	if err != nil {
		return fmt.Errorf("webhook verify: read body: %w", err)
	}
	if len(body) > maxVerifyBody {
		return fmt.Errorf("webhook verify: body over %d bytes", maxVerifyBody)
	}
	now := time.Now()
	if o.Now != 0 {
		now = time.Unix(o.Now, 0)
	}
	res, hints := checkDelivery(o, body, now)
	if g.JSON {
		if err := printJSON(g.stdout, res); err != nil {
			return err
		}
	}
	if res.Valid {
		if !g.JSON {
			fmt.Fprintf(g.stdout, "valid: the signature matches and the timestamp is %s (tolerance %d s)\n",
				describeAge(*res.AgeSeconds), int64(verify.Tolerance/time.Second))
		}
		return nil
	}
	return fmt.Errorf("invalid delivery: %s%s", *res.Reason, strings.Join(hints, ""))
}

// checkDelivery runs verify.Verify and, when it fails, works out what would
// have passed, to point at the cause.
func checkDelivery(o webhookVerifyOptions, body []byte, now time.Time) (verifyResult, []string) {
	sig := o.Signature
	if !strings.HasPrefix(sig, webhook.SignaturePrefix) && len(sig) == 64 {
		sig = webhook.SignaturePrefix + sig // bare hex, as some tools log it
	}
	var res verifyResult
	ts, tsErr := strconv.ParseInt(o.Timestamp, 10, 64)
	if tsErr == nil {
		age := now.Unix() - ts
		res.AgeSeconds = &age
	}
	err := verify.Verify(o.Secret, o.Timestamp, sig, body, now)
	if err == nil {
		res.Valid = true
		matches := true
		res.SignatureMatches = &matches
		return res, nil
	}
	reason := strings.TrimPrefix(err.Error(), "verify: ")
	res.Reason = &reason
	if errors.Is(err, verify.ErrMissingTimestamp) || errors.Is(err, verify.ErrBadSignatureFormat) {
		return res, nil
	}
	// The format is right: judge the signature alone, at the delivery's own time.
	matches := verify.Verify(o.Secret, o.Timestamp, sig, body, time.Unix(ts, 0)) == nil
	res.SignatureMatches = &matches
	var hints []string
	if matches {
		hints = append(hints, "\n  the signature matches: only the timestamp is out of range (a replay, a delay, or a wrong clock)")
		return res, hints
	}
	if strconv.FormatInt(ts, 10) == o.Timestamp {
		want := webhook.Sign(o.Secret, ts, body)
		res.ExpectedSignature = &want
		hints = append(hints, "\n  expected "+want+" for this body, timestamp and secret")
	}
	if trimmed := bytes.TrimRight(body, "\r\n"); len(trimmed) < len(body) &&
		verify.Verify(o.Secret, o.Timestamp, sig, trimmed, time.Unix(ts, 0)) == nil {
		hints = append(hints, "\n  the signature matches the body without its trailing newline: pass the body byte for byte (printf or a file, not echo)")
	}
	if !strings.HasPrefix(o.Secret, "whsec_") {
		hints = append(hints, "\n  dmarcd secrets start with whsec_: use the whole value as the key")
	}
	return res, hints
}

func describeAge(age int64) string {
	if age < 0 {
		return fmt.Sprintf("%d s in the future", -age)
	}
	return fmt.Sprintf("%d s old", age)
}

package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dmarcd/dmarcd/store"
	"github.com/dmarcd/dmarcd/webhook"
)

// runWithStdin runs the command line as main does, with stdin.
func runWithStdin(t *testing.T, env map[string]string, stdin string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	for k, v := range env {
		t.Setenv(k, v)
	}
	var out, errOut bytes.Buffer
	code = execute(context.Background(), args, strings.NewReader(stdin), &out, &errOut)
	return code, out.String(), errOut.String()
}

// signedDelivery returns a delivery body as dmarcd sends it, its
// timestamp and signature.
func signedDelivery(t *testing.T, secret string) (body, ts, sig string) {
	t.Helper()
	ev, err := webhook.NewAlertEvent(store.NewEventID(), "org", map[string]string{"id": "a1", "type": "policy_weakened"}, time.Now(), false)
	if err != nil {
		t.Fatal(err)
	}
	b, err := webhook.Encode(ev)
	if err != nil {
		t.Fatal(err)
	}
	at := int64(1767225600)
	return string(b), strconv.FormatInt(at, 10), webhook.Sign(secret, at, b)
}

// TestWebhookVerifyAccepts ensures a genuine, fresh delivery exits 0 in
// every accepted spelling: header value, bare hex, secret from the
// environment, JSON output, and the real clock.
func TestWebhookVerifyAccepts(t *testing.T) {
	secret := webhook.NewSecret()
	body, ts, sig := signedDelivery(t, secret)
	now := "--now=1767225710"
	for name, c := range map[string]struct {
		env  map[string]string
		args []string
	}{
		"header value": {nil, []string{"--secret", secret, "--timestamp", ts, "--signature", sig, now}},
		"bare hex":     {nil, []string{"--secret", secret, "--timestamp", ts, "--signature", strings.TrimPrefix(sig, "sha256="), now}},
		"env secret":   {map[string]string{"DMARCD_SECRET": secret}, []string{"--timestamp", ts, "--signature", sig, now}},
	} {
		code, out, errOut := runWithStdin(t, c.env, body, append([]string{"webhook", "verify"}, c.args...)...)
		if code != 0 || !strings.Contains(out, "valid: the signature matches and the timestamp is 110 s old") {
			t.Errorf("%s: exit %d, stdout %q, stderr %q", name, code, out, errOut)
		}
	}

	code, out, _ := runWithStdin(t, nil, body, "webhook", "verify", "--json", "--secret", secret, "--timestamp", ts, "--signature", sig, now)
	var res verifyResult
	if err := json.Unmarshal([]byte(out), &res); code != 0 || err != nil || !res.Valid || res.Reason != nil || *res.AgeSeconds != 110 {
		t.Errorf("--json: exit %d, %s (%v)", code, out, err)
	}

	fresh := time.Now().Unix()
	code, out, errOut := runWithStdin(t, nil, body, "webhook", "verify", "--secret", secret,
		"--timestamp", strconv.FormatInt(fresh, 10), "--signature", webhook.Sign(secret, fresh, []byte(body)))
	if code != 0 {
		t.Errorf("real clock: exit %d, %s %s", code, out, errOut)
	}
}

// TestWebhookVerifyRejects ensures every failed rule exits 1 with the reason
// and a hint at the cause, and wrong calls exit 2.
func TestWebhookVerifyRejects(t *testing.T) {
	secret := webhook.NewSecret()
	body, ts, sig := signedDelivery(t, secret)
	for _, c := range []struct {
		name  string
		stdin string
		args  []string
		code  int
		want  []string
	}{
		{"stale", body, []string{"--secret", secret, "--timestamp", ts, "--signature", sig, "--now=1767225901"}, 1,
			[]string{"more than 300 s from now", "301 s in the past", "the signature matches: only the timestamp"}},
		{"future", body, []string{"--secret", secret, "--timestamp", ts, "--signature", sig, "--now=1767225000"}, 1,
			[]string{"600 s in the future"}},
		{"wrong secret", body, []string{"--secret", webhook.NewSecret(), "--timestamp", ts, "--signature", sig, "--now=1767225600"}, 1,
			[]string{"signature does not match", "expected sha256="}},
		{"secret without prefix", body, []string{"--secret", strings.TrimPrefix(secret, "whsec_"), "--timestamp", ts, "--signature", sig, "--now=1767225600"}, 1,
			[]string{"signature does not match", "start with whsec_"}},
		{"trailing newline", body + "\n", []string{"--secret", secret, "--timestamp", ts, "--signature", sig, "--now=1767225600"}, 1,
			[]string{"signature does not match", "without its trailing newline"}},
		{"other algorithm", body, []string{"--secret", secret, "--timestamp", ts, "--signature", "sha1=abc", "--now=1767225600"}, 1,
			[]string{"not sha256= followed by 64 hex digits"}},
		{"empty timestamp", body, []string{"--secret", secret, "--timestamp=", "--signature", sig, "--now=1767225600"}, 1,
			[]string{"missing or not Unix seconds"}},
		{"no signature flag", body, []string{"--secret", secret, "--timestamp", ts}, 2, []string{"signature"}},
		{"no secret", body, []string{"--timestamp", ts, "--signature", sig}, 2, []string{"secret"}},
		{"argument", body, []string{"--secret", secret, "--timestamp", ts, "--signature", sig, "body.json"}, 2, []string{"standard input"}},
	} {
		code, out, errOut := runWithStdin(t, nil, c.stdin, append([]string{"webhook", "verify"}, c.args...)...)
		if code != c.code {
			t.Errorf("%s: exit %d, want %d (stdout %q, error %q)", c.name, code, c.code, out, errOut)
		}
		for _, w := range c.want {
			if !strings.Contains(errOut, w) {
				t.Errorf("%s: error %q does not mention %q", c.name, errOut, w)
			}
		}
		if strings.Contains(out+errOut, secret) {
			t.Errorf("%s: the secret was printed", c.name)
		}
	}
}

// TestWebhookVerifyJSONRejection ensures --json reports an invalid delivery
// on stdout too, with the expected signature, and still exits 1.
func TestWebhookVerifyJSONRejection(t *testing.T) {
	secret := webhook.NewSecret()
	_, ts, sig := signedDelivery(t, secret)
	code, out, _ := runWithStdin(t, nil, `{"tampered":true}`, "webhook", "verify", "--json",
		"--secret", secret, "--timestamp", ts, "--signature", sig, "--now=1767225600")
	var res verifyResult
	if err := json.Unmarshal([]byte(out), &res); code != 1 || err != nil || res.Valid || res.Reason == nil ||
		res.SignatureMatches == nil || *res.SignatureMatches || res.ExpectedSignature == nil ||
		*res.ExpectedSignature != webhook.Sign(secret, 1767225600, []byte(`{"tampered":true}`)) {
		t.Errorf("exit %d, %s (%v)", code, out, err)
	}
}

// TestWebhookVerifyHelp ensures the help shows what is signed and how to
// reproduce it with openssl and curl.
func TestWebhookVerifyHelp(t *testing.T) {
	code, out, _ := runWithStdin(t, nil, "", "webhook", "verify", "--help")
	for _, w := range []string{"HMAC-SHA256(secret, \"<X-Webhook-Timestamp>.<body>\")", "openssl dgst -sha256 -hmac", "curl", "DMARCD_SECRET", "Exit codes"} {
		if code != 0 || !strings.Contains(out, w) {
			t.Errorf("help (exit %d) lacks %q", code, w)
		}
	}
	if strings.Contains(out, "--now") {
		t.Error("the testing flag --now is shown in the help")
	}
}

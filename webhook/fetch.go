package webhook

import (
	"context"
	"errors"
	"io"
	"net/http"
)

// Get fetches rawURL (https only) under the client's address policy, with
// no redirects followed, and returns the status, the Content-Type and at
// most max bytes of the body; a longer body is an error. It serves
// check-tls, which fetches MTA-STS policy files with the webhook rules.
// The context bounds the whole fetch.
func (c *Client) Get(ctx context.Context, rawURL string, max int64) (int, string, []byte, error) {
	if _, uerr := parseTarget(rawURL, c.policy); uerr != nil {
		return 0, "", nil, errors.New(uerr.Reason)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, rawURL, nil)
	if err != nil {
		return 0, "", nil, errors.New("not a valid URL")
	}
	req.Header.Set("User-Agent", UserAgent)
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, "", nil, errors.New(c.describe(err))
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, max+1))
	if err != nil {
		return resp.StatusCode, "", nil, errors.New(c.describe(err))
	}
	if int64(len(body)) > max {
		return resp.StatusCode, "", nil, errors.New("the body is larger than allowed")
	}
	return resp.StatusCode, resp.Header.Get("Content-Type"), body, nil
}

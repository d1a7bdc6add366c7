package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/url"
	"runtime/debug"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// The exit codes of the commands that talk to a gateway's admin API, for
// scripts (the README's "Operating fairq" lists them).
const (
	exitFailed      = 1 // the gateway refused or failed the request
	exitUsage       = 2 // the command line could not be understood
	exitUnreachable = 3 // the gateway could not be reached, or did not answer in time
	exitNotFound    = 4 // what the command names does not exist (an unknown tenant)
)

// exitError ends the command with its code after printing "fairq: msg"
// on one line; an empty msg means the command already said why.
type exitError struct {
	code int
	msg  string
}

func (e *exitError) Error() string { return e.msg }

// adminURLDefault is the gateway's admin API when neither --url nor
// FAIRQ_ADMIN_URL names one: fairq's default listen address.
const adminURLDefault = "http://127.0.0.1:8080"

// adminTimeoutDefault bounds each call to the admin API, reading the
// answer included. A redrive call moves up to --batch dead letters, ten
// at a time, before it answers.
const adminTimeoutDefault = 60 * time.Second

// maxAdminAnswer caps an answer of the admin API read into memory: a page
// of dead letters with their bodies is the largest.
const maxAdminAnswer = 64 << 20

// adminClient calls one gateway's admin API.
type adminClient struct {
	base    string // scheme://host[:port][/prefix], no trailing slash
	token   string
	timeout time.Duration
	http    *http.Client
	agent   string
}

// newAdminClient checks the gateway's URL and returns a client for it.
// Close releases its idle connections.
func newAdminClient(rawURL, token string, timeout time.Duration) (*adminClient, error) {
	u, err := url.Parse(rawURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("%w: gateway URL %q: want http(s)://host[:port][/path]", errUsage, rawURL)
	}
	if u.User != nil {
		return nil, fmt.Errorf("%w: gateway URL: no credentials in the URL; the token comes from FAIRQ_ADMIN_TOKEN or --token-file", errUsage)
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	return &adminClient{
		base:    strings.TrimRight(u.String(), "/"),
		token:   token,
		timeout: timeout,
		http:    &http.Client{Transport: tr, Timeout: timeout},
		agent:   "fairq/" + readBuild(debug.ReadBuildInfo()).Version,
	}, nil
}

// Close closes the client's idle connections.
func (c *adminClient) Close() { c.http.CloseIdleConnections() }

// problemAnswer is the part of an RFC 9457 problem the command prints.
type problemAnswer struct {
	Code   string `json:"code"`
	Detail string `json:"detail"`
}

// call sends method path (under /admin/v1, its segments already escaped)
// with query and, when body is not nil, body as JSON, and returns the
// status and the answer of a 2xx. Any other outcome is an *exitError
// whose code says what happened.
func (c *adminClient) call(ctx context.Context, method, path string, query url.Values, body any) (int, []byte, error) {
	target := c.base + "/admin/v1" + path
	if len(query) > 0 {
		target += "?" + query.Encode()
	}
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return 0, nil, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, target, rd)
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", c.agent)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := c.http.Do(req)
	if err != nil {
		return 0, nil, c.unreachable(ctx, err)
	}
	defer res.Body.Close()
	data, err := io.ReadAll(io.LimitReader(res.Body, maxAdminAnswer+1))
	if err != nil {
		return 0, nil, c.unreachable(ctx, err)
	}
	if len(data) > maxAdminAnswer {
		return 0, nil, &exitError{code: exitFailed, msg: fmt.Sprintf("the answer to %s %s is larger than %d MiB", method, path, maxAdminAnswer>>20)}
	}
	if res.StatusCode >= 200 && res.StatusCode < 300 {
		return res.StatusCode, data, nil
	}
	return 0, nil, refusal(method, "/admin/v1"+path, res, data)
}

// unreachable is the error of a request that got no answer: the gateway
// could not be reached or did not answer within the timeout, unless the
// command itself was interrupted.
func (c *adminClient) unreachable(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return &exitError{code: exitFailed, msg: "interrupted"}
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return &exitError{code: exitUnreachable, msg: fmt.Sprintf("cannot reach the gateway at %s: no answer within %v (--timeout)", c.base, c.timeout)}
	}
	return &exitError{code: exitUnreachable, msg: fmt.Sprintf("cannot reach the gateway at %s: %v", c.base, err)}
}

// refusal is the error of an answer other than 2xx: "code: detail" of its
// problem, exit 4 for a thing that does not exist, 1 otherwise.
func refusal(method, path string, res *http.Response, data []byte) error {
	mt, _, _ := mime.ParseMediaType(res.Header.Get("Content-Type"))
	var p problemAnswer
	if (mt != "application/problem+json" && mt != "application/json") || json.Unmarshal(data, &p) != nil || p.Code == "" {
		// Not fairq's answer: a proxy in front of it, or another server
		// on that port.
		return &exitError{code: exitFailed, msg: fmt.Sprintf("%s %s: answer %s that is not fairq's (%s): %s",
			method, path, res.Status, mt, printable(snippet(data, 200)))}
	}
	detail := printable(p.Detail)
	if ra := res.Header.Get("Retry-After"); ra != "" && (res.StatusCode == http.StatusServiceUnavailable || res.StatusCode == http.StatusTooManyRequests) {
		detail += " (retry after " + printable(ra) + " s)"
	}
	if res.StatusCode == http.StatusNotFound && p.Code == "not_found" {
		// The gateway's router answers "no route METHOD PATH" for an
		// endpoint it does not serve: /admin is off, or the gateway is a
		// release older than this command. That is no unknown tenant.
		if strings.HasPrefix(p.Detail, "no route ") {
			return &exitError{code: exitFailed, msg: fmt.Sprintf("not_found: the gateway does not serve %s %s: its admin API is off (admin.token_sha256 unset) or it runs an older fairq", method, path)}
		}
		return &exitError{code: exitNotFound, msg: "not_found: " + detail}
	}
	return &exitError{code: exitFailed, msg: printable(p.Code) + ": " + detail}
}

// decodeAnswer decodes an answer of the admin API into v.
func decodeAnswer(what string, data []byte, v any) error {
	if err := json.Unmarshal(data, v); err != nil {
		return &exitError{code: exitFailed, msg: fmt.Sprintf("the gateway's answer to %s is not the JSON expected: %v", what, err)}
	}
	return nil
}

// snippet returns at most n bytes of b, cut at a rune boundary, with its
// spaces collapsed.
func snippet(b []byte, n int) string {
	s := strings.Join(strings.Fields(string(b)), " ")
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

// printable escapes the control characters of s, which came from the
// gateway (an application's error text, a message body), so that printing
// it cannot move the cursor or retitle the terminal; the rest is left as
// it is.
func printable(s string) string {
	if !strings.ContainsFunc(s, func(r rune) bool { return unicode.IsControl(r) || r == utf8.RuneError }) {
		return s
	}
	var b strings.Builder
	for i, r := range s {
		switch {
		case r == utf8.RuneError:
			if _, size := utf8.DecodeRuneInString(s[i:]); size == 1 {
				fmt.Fprintf(&b, `\x%02x`, s[i])
				continue
			}
			b.WriteRune(r)
		case unicode.IsControl(r):
			q := fmt.Sprintf("%+q", string(r))
			b.WriteString(q[1 : len(q)-1])
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

package obs

import (
	"bytes"
	"fmt"
	"net"
	"net/http"
	"regexp"
	"strconv"
	"sync/atomic"
)

// plainError is an answer net/http writes by itself when it cannot read a
// request (server.go, conn.serve): one write of a status line, exactly
// these two headers and a text body. Answers of handlers always carry a
// Date header between them, so they never match.
var plainError = regexp.MustCompile(`(?s)^HTTP/1\.1 ([0-9]{3}) [^\r\n]*\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\n(.*)$`)

// statusPrefix is the "400 Bad Request: " that starts most of those
// bodies; what follows it says what was wrong.
var statusPrefix = regexp.MustCompile(`^[0-9]{3} [^:]*(: )?`)

// protocolErrors makes ln's connections render net/http's own error
// answers with render: a request line or headers over MaxHeaderBytes, a
// malformed request, an unsupported transfer encoding or protocol version
// reach no handler, and Go answers them in plain text on the connection
// itself. The connection recognises that write and replaces it.
//
// net/http reports an over-long request line as it reports over-long
// headers (431); the connection tells them apart by what it has read: a
// request line is over-long when no line feed arrived since the previous
// answer began (414). A pipelined request, or the unread body of the
// previous one, can hold a line feed and make an over-long URI a 431:
// rare, and still a JSON answer.
func protocolErrors(ln net.Listener, limit int, render func(int, string) (string, []byte)) net.Listener {
	return &protoErrListener{Listener: ln, limit: limit, render: render}
}

type protoErrListener struct {
	net.Listener
	limit  int
	render func(int, string) (string, []byte)
}

func (l *protoErrListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &protoErrConn{Conn: c, l: l}, nil
}

type protoErrConn struct {
	net.Conn
	l *protoErrListener
	// lineRead: a line feed was read since the last answer began, so the
	// request line being read, if any, is complete.
	lineRead atomic.Bool
}

func (c *protoErrConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 && bytes.IndexByte(p[:n], '\n') >= 0 {
		c.lineRead.Store(true)
	}
	return n, err
}

func (c *protoErrConn) Write(p []byte) (int, error) {
	m := plainError.FindSubmatch(p)
	if m == nil {
		c.lineRead.Store(false)
		return c.Conn.Write(p)
	}
	status, _ := strconv.Atoi(string(m[1]))
	var msg string
	switch {
	case status == http.StatusRequestHeaderFieldsTooLarge && !c.lineRead.Load():
		status = http.StatusRequestURITooLong
		msg = fmt.Sprintf("the request line (method, URI and protocol) must not exceed %d bytes", c.l.limit)
	case status == http.StatusRequestHeaderFieldsTooLarge:
		msg = fmt.Sprintf("the request line and headers must not exceed %d bytes together", c.l.limit)
	default:
		// "400 Bad Request: missing required Host header", "400 Bad
		// Request", "Unsupported transfer encoding".
		msg = string(m[2])
		if loc := statusPrefix.FindStringSubmatchIndex(msg); loc != nil && loc[2] >= 0 {
			msg = msg[loc[1]:]
		} else if loc != nil {
			msg = http.StatusText(status)
		}
	}
	ctype, body := c.l.render(status, msg)
	head := fmt.Sprintf("HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %d\r\nConnection: close\r\n\r\n",
		status, http.StatusText(status), ctype, len(body))
	if _, err := c.Conn.Write(append([]byte(head), body...)); err != nil {
		return 0, err
	}
	return len(p), nil
}

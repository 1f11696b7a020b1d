// Package apierr is the one error shape of the query API: every non-2xx
// response carries {"message", "statusCode", "error"} (CONTRACT.md section
// 3.1), with message a string, or an array of strings for validation errors
// in the wording of NestJS class-validator.
//
// Handlers and middleware (including the authentication, plan and rate-limit
// middleware of later endpoints) return or abort with an *Error and let
// Write render it; anything that is not an *Error becomes a 500 whose cause
// is logged but never sent.
package apierr

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/gin-gonic/gin"
)

// Error is an API error: the status and the message clients see, and the
// cause, which is logged and never sent.
type Error struct {
	Status int
	// Message is a string or a []string (validation errors).
	Message any
	Cause   error
}

func (e *Error) Error() string {
	if e.Cause != nil {
		return fmt.Sprintf("%d %v: %v", e.Status, e.Message, e.Cause)
	}
	return fmt.Sprintf("%d %v", e.Status, e.Message)
}

func (e *Error) Unwrap() error { return e.Cause }

// New returns an error with a single-string message.
func New(status int, message string) *Error { return &Error{Status: status, Message: message} }

// Validation returns a 400 whose message is the list of failed constraints,
// e.g. "pageSize must not be greater than 100".
func Validation(msgs ...string) *Error {
	return &Error{Status: http.StatusBadRequest, Message: append([]string(nil), msgs...)}
}

// NotFound returns a 404 with message.
func NotFound(message string) *Error { return New(http.StatusNotFound, message) }

// Unavailable returns a 503: the data behind the request cannot be read
// right now (ClickHouse down or overloaded). cause is logged.
func Unavailable(message string, cause error) *Error {
	return &Error{Status: http.StatusServiceUnavailable, Message: message, Cause: cause}
}

// Internal returns a 500 with the NestJS default message; cause is logged.
func Internal(cause error) *Error {
	return &Error{Status: http.StatusInternalServerError, Message: "Internal server error", Cause: cause}
}

// Body is the JSON error body. Field order follows the contract.
type Body struct {
	Message    any    `json:"message"`
	StatusCode int    `json:"statusCode"`
	Error      string `json:"error"`
}

// From maps any error to an *Error: an *Error in the chain is used as is,
// anything else is a 500.
func From(err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	return Internal(err)
}

// BodyOf returns the body for e; a nil or empty message becomes the reason
// phrase so the field is never null.
func BodyOf(e *Error) Body {
	msg := e.Message
	switch m := msg.(type) {
	case nil:
		msg = ReasonPhrase(e.Status)
	case []string:
		if m == nil {
			msg = []string{}
		}
	}
	return Body{Message: msg, StatusCode: e.Status, Error: ReasonPhrase(e.Status)}
}

// nodeReasons are the reason phrases where Node's http.STATUS_CODES (what
// NestJS's exceptions and the hosted service send) differ from Go's.
var nodeReasons = map[int]string{
	http.StatusRequestEntityTooLarge:        "Payload Too Large",
	http.StatusRequestURITooLong:            "URI Too Long",
	http.StatusRequestedRangeNotSatisfiable: "Range Not Satisfiable",
}

// ReasonPhrase is the error field for status, in the hosted service's
// words (Node's), e.g. 413 "Payload Too Large".
func ReasonPhrase(status int) string {
	if r, ok := nodeReasons[status]; ok {
		return r
	}
	return http.StatusText(status)
}

// Write renders err, aborts the handler chain and records err on the gin
// context (for the access log).
func Write(c *gin.Context, err error) {
	e := From(err)
	_ = c.Error(err)
	c.AbortWithStatusJSON(e.Status, BodyOf(e))
}

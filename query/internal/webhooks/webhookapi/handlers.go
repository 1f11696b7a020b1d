package webhookapi

import (
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"strconv"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/moraine-data/moraine/pkg/accountdb"
	"github.com/moraine-data/moraine/pkg/chains"
	"github.com/moraine-data/moraine/query/internal/access/auth"
	"github.com/moraine-data/moraine/query/internal/server/apierr"
)

// webhookResponse is EVMAddressActivityResponse (CONTRACT.md section 2.7),
// fields in the order of the hosted service's example.
type webhookResponse struct {
	ID                 string   `json:"id"`
	EventType          string   `json:"eventType"`
	ChainID            string   `json:"chainId"`
	Metadata           metadata `json:"metadata"`
	IncludeInternalTxs bool     `json:"includeInternalTxs"`
	IncludeLogs        bool     `json:"includeLogs"`
	URL                string   `json:"url"`
	Status             string   `json:"status"`
	CreatedAt          uint64   `json:"createdAt"`
	Name               string   `json:"name"`
	Description        string   `json:"description"`
	// Confirmations is a moraine extension (docs/webhook-stream.md),
	// omitted when 0 so a webhook created as on the hosted service is
	// answered exactly as there.
	Confirmations uint32 `json:"confirmations,omitempty"`
	// ReplayID is a moraine extension: the replay a create with fromBlock
	// started (only on that answer).
	ReplayID string `json:"replayId,omitempty"`
}

type metadata struct {
	Addresses []string `json:"addresses"`
	// Omitted unless set (optional fields are never null).
	EventSignatures []string `json:"eventSignatures,omitempty"`
}

type listWebhooksResponse struct {
	Webhooks      []webhookResponse `json:"webhooks"`
	NextPageToken string            `json:"nextPageToken,omitempty"`
}

type listAddressesResponse struct {
	Addresses      []string `json:"addresses"`
	TotalAddresses int      `json:"totalAddresses"`
	NextPageToken  string   `json:"nextPageToken,omitempty"`
}

// deliveryResponse is one attempt of the delivery log (a moraine
// extension; the hosted service has no such route).
type deliveryResponse struct {
	MessageID string `json:"messageId"`
	Attempt   int    `json:"attempt"`
	// Status is the HTTP status, 0 when no response arrived.
	Status int    `json:"status"`
	Result string `json:"result"`
	// LatencyMs is the attempt's duration.
	LatencyMs int    `json:"latencyMs"`
	Error     string `json:"error,omitempty"`
	// AttemptedAt and NextAttemptAt are Unix milliseconds; NextAttemptAt
	// only when another attempt is scheduled.
	AttemptedAt   uint64 `json:"attemptedAt"`
	NextAttemptAt uint64 `json:"nextAttemptAt,omitempty"`
}

type listDeliveriesResponse struct {
	Deliveries    []deliveryResponse `json:"deliveries"`
	NextPageToken string             `json:"nextPageToken,omitempty"`
}

type secretResponse struct {
	Secret string `json:"secret"`
}

func toResponse(v view) webhookResponse {
	return webhookResponse{
		ID: v.w.ID, EventType: v.w.EventType, ChainID: v.w.ChainID,
		Metadata:           metadata{Addresses: nonNil(v.addresses), EventSignatures: v.w.EventSignatures},
		IncludeInternalTxs: v.w.IncludeInternalTxs, IncludeLogs: v.w.IncludeLogs,
		URL: v.w.URL, Status: v.w.Status, CreatedAt: v.w.CreatedAt, Name: v.w.Name, Description: v.w.Description,
		Confirmations: v.w.Confirmations, ReplayID: v.replayID,
	}
}

type handlers struct {
	svc     *service
	chains  *chains.Config
	tokens  *tokenCodec
	maxBody int64
}

func principal(c *gin.Context) auth.Principal {
	// Every route is server.Account: access control let the request
	// through only with a valid key, so the principal is set.
	return *auth.From(c).Principal
}

// body reads the request body, at most maxBody bytes.
func (h *handlers) body(c *gin.Context) ([]byte, error) {
	b, err := io.ReadAll(http.MaxBytesReader(c.Writer, c.Request.Body, h.maxBody))
	var tooBig *http.MaxBytesError
	if errors.As(err, &tooBig) {
		return nil, apierr.New(http.StatusRequestEntityTooLarge, fmt.Sprintf("Request body larger than %d bytes", h.maxBody))
	}
	if errors.Is(err, os.ErrDeadlineExceeded) {
		// The server's --http.read-timeout ran out before the body did
		// (a client announcing more than it sends); Node answers 408.
		return nil, apierr.New(http.StatusRequestTimeout, "Request body not received within the read timeout")
	}
	if err != nil {
		return nil, apierr.New(http.StatusBadRequest, "Request body could not be read")
	}
	return b, nil
}

// pageSize reads pageSize (1..100, default 10) the way NestJS's
// ValidationPipe reports it.
func pageSize(c *gin.Context, errs *[]string) int {
	raw, ok := c.GetQuery("pageSize")
	if !ok {
		return 10
	}
	v, err := strconv.ParseFloat(strings.TrimSpace(raw), 64)
	if strings.TrimSpace(raw) == "" {
		v, err = 0, nil
	}
	if err != nil {
		v = math.NaN()
	}
	failed := false
	if !(v <= 100) {
		*errs = append(*errs, "pageSize must not be greater than 100")
		failed = true
	}
	if !(v >= 1) {
		*errs = append(*errs, "pageSize must not be less than 1")
		failed = true
	}
	if math.IsNaN(v) || v != math.Trunc(v) {
		*errs = append(*errs, "pageSize must be an integer number")
		failed = true
	}
	if failed {
		return 10
	}
	return int(v)
}

const msgBadToken = "pageToken must be a page token returned by the previous page of this list"

// parseBody reads the request body and parses it with parse.
func parseBody[T any](h *handlers, c *gin.Context, parse func([]byte) (T, error)) (T, error) {
	b, err := h.body(c)
	if err != nil {
		var zero T
		return zero, err
	}
	return parse(b)
}

// respond answers with v as a webhook response of status code, or with
// err's error body.
func respond(c *gin.Context, code int, v view, err error) {
	if err != nil {
		apierr.Write(c, err)
		return
	}
	c.JSON(code, toResponse(v))
}

func (h *handlers) create(c *gin.Context) {
	req, err := parseBody(h, c, func(b []byte) (createRequest, error) { return parseCreate(b, h.chains) })
	if err == nil {
		err = h.svc.checkURL(c.Request.Context(), req.URL)
	}
	if err != nil {
		apierr.Write(c, err)
		return
	}
	v, err := h.svc.create(c.Request.Context(), principal(c), req)
	respond(c, http.StatusCreated, v, err)
}

func (h *handlers) list(c *gin.Context) {
	p := principal(c)
	var errs []string
	size := pageSize(c, &errs)
	status, hasStatus := c.GetQuery("status")
	if hasStatus && status != accountdb.StatusActive && status != accountdb.StatusInactive {
		errs = append(errs, msgStatus)
	}
	after := accountdb.FirstWebhookPage
	if raw := c.Query("pageToken"); raw != "" {
		t, err := h.tokens.decode(raw, kindWebhooks)
		if err != nil || t.accountID != p.Account.ID || t.status != status {
			errs = append(errs, msgBadToken)
		} else {
			after = accountdb.WebhookCursor{CreatedAt: t.createdAt, ID: t.id}
		}
	}
	if len(errs) > 0 {
		apierr.Write(c, apierr.Validation(errs...))
		return
	}
	views, more, err := h.svc.list(c.Request.Context(), p.Account.ID, status, after, size)
	if err != nil {
		apierr.Write(c, err)
		return
	}
	resp := listWebhooksResponse{Webhooks: make([]webhookResponse, len(views))}
	for i, v := range views {
		resp.Webhooks[i] = toResponse(v)
	}
	if more {
		last := views[len(views)-1].w
		resp.NextPageToken = h.tokens.encode(pageToken{kind: kindWebhooks, accountID: p.Account.ID, status: status, createdAt: last.CreatedAt, id: last.ID})
	}
	c.JSON(http.StatusOK, resp)
}

func (h *handlers) get(c *gin.Context) {
	v, err := h.svc.get(c.Request.Context(), principal(c).Account.ID, c.Param("id"))
	respond(c, http.StatusOK, v, err)
}

func (h *handlers) update(c *gin.Context) {
	req, err := parseBody(h, c, parseUpdate)
	if err != nil {
		apierr.Write(c, err)
		return
	}
	v, err := h.svc.update(c.Request.Context(), principal(c), c.Param("id"), req, OpUpdate)
	respond(c, http.StatusOK, v, err)
}

// deactivate is DELETE /v1/webhooks/{id}: a soft delete to status
// inactive (PATCH status active reactivates). Any body is ignored.
func (h *handlers) deactivate(c *gin.Context) {
	inactive := accountdb.StatusInactive
	v, err := h.svc.update(c.Request.Context(), principal(c), c.Param("id"), updateRequest{Status: &inactive}, OpDeactivate)
	respond(c, http.StatusOK, v, err)
}

func (h *handlers) changeAddresses(c *gin.Context, remove bool) {
	addrs, err := parseBody(h, c, parseAddresses)
	if err != nil {
		apierr.Write(c, err)
		return
	}
	v, err := h.svc.changeAddresses(c.Request.Context(), principal(c), c.Param("id"), addrs, remove)
	respond(c, http.StatusOK, v, err)
}

func (h *handlers) addAddresses(c *gin.Context)    { h.changeAddresses(c, false) }
func (h *handlers) removeAddresses(c *gin.Context) { h.changeAddresses(c, true) }

func (h *handlers) listAddresses(c *gin.Context) {
	p := principal(c)
	id := c.Param("id")
	var errs []string
	size := pageSize(c, &errs)
	after := ""
	if raw := c.Query("pageToken"); raw != "" {
		t, err := h.tokens.decode(raw, kindAddresses)
		if err != nil || t.accountID != p.Account.ID || t.webhookID != id {
			errs = append(errs, msgBadToken)
		} else {
			after = t.address
		}
	}
	if len(errs) > 0 {
		apierr.Write(c, apierr.Validation(errs...))
		return
	}
	rows, total, more, err := h.svc.listAddresses(c.Request.Context(), p.Account.ID, id, after, size)
	if err != nil {
		apierr.Write(c, err)
		return
	}
	resp := listAddressesResponse{Addresses: make([]string, len(rows)), TotalAddresses: total}
	for i, a := range rows {
		resp.Addresses[i] = a.Given
	}
	if more {
		resp.NextPageToken = h.tokens.encode(pageToken{kind: kindAddresses, accountID: p.Account.ID, webhookID: id, address: rows[len(rows)-1].Address})
	}
	c.JSON(http.StatusOK, resp)
}

// listDeliveries is GET /v1/webhooks/{id}/deliveries: the delivery log of
// one of the caller's webhooks, newest attempt first.
func (h *handlers) listDeliveries(c *gin.Context) {
	p := principal(c)
	id := c.Param("id")
	var errs []string
	size := pageSize(c, &errs)
	after := accountdb.FirstDeliveryPage
	if raw := c.Query("pageToken"); raw != "" {
		t, err := h.tokens.decode(raw, kindDeliveries)
		if err != nil || t.accountID != p.Account.ID || t.webhookID != id || t.attempt > 255 {
			errs = append(errs, msgBadToken)
		} else {
			after = accountdb.DeliveryCursor{AttemptedAt: t.attemptedAt, MessageID: t.messageID, Attempt: uint8(t.attempt)}
		}
	}
	if len(errs) > 0 {
		apierr.Write(c, apierr.Validation(errs...))
		return
	}
	rows, more, err := h.svc.listDeliveries(c.Request.Context(), p.Account.ID, id, after, size)
	if err != nil {
		apierr.Write(c, err)
		return
	}
	resp := listDeliveriesResponse{Deliveries: make([]deliveryResponse, len(rows))}
	for i, d := range rows {
		resp.Deliveries[i] = toDeliveryResponse(d)
	}
	if more {
		last := rows[len(rows)-1]
		resp.NextPageToken = h.tokens.encode(pageToken{kind: kindDeliveries, accountID: p.Account.ID, webhookID: id,
			attemptedAt: last.AttemptedAt, messageID: last.MessageID, attempt: uint64(last.Attempt)})
	}
	c.JSON(http.StatusOK, resp)
}

// What the delivery log shows for attempts that got no HTTP response. The
// account sees the class of failure, not the resolver's or the socket's
// words nor how long the failure took: "connection refused" after 1 ms,
// "no route to host" after 3 s and a TLS error tell open, closed and
// filtered ports apart, which would make webhooks a port scanner of
// whatever the endpoint's name leads to. The rows in ClickHouse
// (moraine.deliveries) keep the full error for the operator.
const (
	msgDeliveryNetwork = "could not connect to the endpoint or read its response (DNS, connection, TLS or protocol failure)"
	msgDeliveryRefused = "the endpoint's address is refused by the delivery policy (loopback, private, link-local or another internal address)"
	msgDeliveryTimeout = "no response within the attempt timeout"
)

// toDeliveryResponse is one attempt as the account sees it: status,
// latency and error as recorded when the endpoint answered over HTTP
// (success, http_error); for network and refused_target no status, no
// latency and a fixed text; for timeout the recorded latency (the
// timeout) and a fixed text.
func toDeliveryResponse(d accountdb.Delivery) deliveryResponse {
	r := deliveryResponse{
		MessageID: d.MessageID, Attempt: int(d.Attempt), Status: int(d.Status), Result: d.Result,
		LatencyMs: int(d.LatencyMs), Error: d.Error, AttemptedAt: d.AttemptedAt, NextAttemptAt: d.NextAttemptAt,
	}
	switch d.Result {
	case accountdb.ResultNetwork:
		r.Status, r.LatencyMs, r.Error = 0, 0, msgDeliveryNetwork
	case accountdb.ResultRefusedTarget:
		r.Status, r.LatencyMs, r.Error = 0, 0, msgDeliveryRefused
	case accountdb.ResultTimeout:
		r.Status, r.Error = 0, msgDeliveryTimeout
	}
	return r
}

func (h *handlers) rotateSecret(c *gin.Context) {
	s, err := h.svc.rotateSecret(c.Request.Context(), principal(c))
	if err != nil {
		apierr.Write(c, err)
		return
	}
	c.JSON(http.StatusCreated, secretResponse{Secret: s})
}

func (h *handlers) getSecret(c *gin.Context) {
	s, err := h.svc.secret(c.Request.Context(), principal(c).Account.ID)
	if err != nil {
		apierr.Write(c, err)
		return
	}
	c.JSON(http.StatusOK, secretResponse{Secret: s})
}

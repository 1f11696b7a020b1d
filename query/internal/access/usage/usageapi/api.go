package usageapi

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"log/slog"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/moraine-data/moraine/pkg/accountdb"
	"github.com/moraine-data/moraine/pkg/chclient"
	"github.com/moraine-data/moraine/pkg/obs"
	"github.com/moraine-data/moraine/query/internal/access/auth"
	"github.com/moraine-data/moraine/query/internal/server"
	"github.com/moraine-data/moraine/query/internal/server/apierr"
	"github.com/moraine-data/moraine/query/internal/server/pagetoken"
)

// Operators says which keys are operator keys, and whose a key is;
// *accountdb.DB implements it.
type Operators interface {
	IsOperator(ctx context.Context, keyID string) (bool, error)
	KeyByID(ctx context.Context, id string) (accountdb.Key, error)
}

// Deps are the routes' collaborators.
type Deps struct {
	Logger     *slog.Logger
	Registerer prometheus.Registerer
	// Conn is ClickHouse, set once it answers.
	Conn *chclient.Lazy
	// Timeout bounds every read (the service's --query.timeout).
	Timeout   time.Duration
	Operators Operators
	// OperatorTTL is how long an operator lookup is reused (the key
	// cache's --auth.cache-ttl).
	OperatorTTL time.Duration
	// ChainID turns a chainId filter into the decimal EVM chain id of a
	// configured chain ("" when it names none).
	ChainID func(string) string
	// PageTokenKey signs page tokens; PageTokenTTL bounds them (0: never
	// expire).
	PageTokenKey []byte
	PageTokenTTL time.Duration
	// Now is the clock (time.Now when nil).
	Now func() time.Time
}

// API serves the usage routes.
type API struct {
	d      Deps
	store  *Store
	tokens *pagetoken.Envelope

	mu        sync.Mutex
	operators map[string]operatorEntry
}

type operatorEntry struct {
	operator bool
	expires  time.Time
}

// New validates the collaborators; no I/O.
func New(d Deps) (*API, error) {
	if d.Logger == nil || d.Registerer == nil || d.Conn == nil || d.Operators == nil || d.ChainID == nil || d.Timeout <= 0 {
		return nil, errors.New("usageapi: Deps.Logger, Registerer, Conn, Operators, ChainID and a positive Timeout are required")
	}
	if d.Now == nil {
		d.Now = time.Now
	}
	env, err := pagetoken.NewEnvelope(d.PageTokenKey, "moraine-usage-page-token", d.PageTokenTTL, d.Now)
	if err != nil {
		return nil, err
	}
	f := obs.NewMetrics(d.Registerer, "query")
	return &API{d: d, tokens: env, operators: map[string]operatorEntry{},
		store: &Store{conn: d.Conn, timeout: d.Timeout, maxValues: MaxValues, duration: f.HistogramVec("usage_read_duration_seconds",
			"Time of the usage routes' ClickHouse reads: metrics by rollup, and logs.",
			[]float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5}, "read")},
	}, nil
}

// Routes are the usage routes of the table.
func (a *API) Routes() []server.Route {
	return []server.Route{
		{Method: http.MethodGet, Path: "/v1/apiUsageMetrics", Operation: "getApiUsageMetrics", Weight: server.WeightXXL,
			Access: server.Account, Handler: a.metrics},
		{Method: http.MethodGet, Path: "/v1/apiLogs", Operation: "getApiLogs", Weight: server.WeightXXL,
			Access: server.Account, Handler: a.logs},
	}
}

// all is the orgId of an operator's answer over every account.
const all = "all"

// scopeOf decides whose usage the request reads: the caller's account, or
// (an operator key) every account or the one orgId names.
func (a *API) scopeOf(c *gin.Context, f filters) (scope, string, error) {
	p := auth.From(c).Principal // Access: Account, so never nil
	own := p.Account.ID
	if f.hasOrg && f.orgID == own {
		return scope{account: own}, own, nil
	}
	op, err := a.isOperator(c.Request.Context(), p.KeyID)
	if err != nil {
		return scope{}, "", apierr.Unavailable("Usage data is temporarily unavailable", err)
	}
	switch {
	case op && f.hasOrg:
		return scope{account: f.orgID}, f.orgID, nil
	case op && f.keyID != "":
		// One key's requests are its account's: read that account's rows
		// only (an unknown key's none: the keyless account has no key).
		k, err := a.d.Operators.KeyByID(c.Request.Context(), f.keyID)
		switch {
		case errors.Is(err, accountdb.ErrNotFound):
			return scope{account: ""}, all, nil
		case err != nil:
			return scope{}, "", apierr.Unavailable("Usage data is temporarily unavailable", err)
		}
		return scope{account: k.AccountID}, all, nil
	case op:
		return scope{all: true}, all, nil
	case f.hasOrg:
		return scope{}, "", apierr.New(http.StatusForbidden,
			"orgId "+strconv.Quote(f.orgID)+" is not the organization of this API key: a key reads its own organization's usage, and only an operator key reads others'")
	}
	return scope{account: own}, own, nil
}

// isOperator looks keyID up, reusing an answer for OperatorTTL.
func (a *API) isOperator(ctx context.Context, keyID string) (bool, error) {
	now := a.d.Now()
	a.mu.Lock()
	e, ok := a.operators[keyID]
	a.mu.Unlock()
	if ok && now.Before(e.expires) {
		return e.operator, nil
	}
	op, err := a.d.Operators.IsOperator(ctx, keyID)
	if err != nil {
		return false, err
	}
	a.mu.Lock()
	if len(a.operators) > 10_000 {
		clear(a.operators)
	}
	a.operators[keyID] = operatorEntry{operator: op, expires: now.Add(a.d.OperatorTTL)}
	a.mu.Unlock()
	return op, nil
}

// metrics serves getApiUsageMetrics.
func (a *API) metrics(c *gin.Context) {
	r := &reader{c: c, now: a.d.Now()}
	f := r.filters()
	interval := r.enum("timeInterval", intervals)
	if interval == "" {
		interval = "daily"
	}
	groupBy := r.enum("groupBy", groupings)
	if !r.valid() {
		return
	}
	if n := buckets(interval, f.from, f.to); n > MaxBuckets {
		apierr.Write(c, apierr.Validation("the range from startTimestamp to endTimestamp holds "+strconv.Itoa(n)+" "+interval+
			" buckets; at most "+strconv.Itoa(MaxBuckets)+" are answered at once (a coarser timeInterval, or a shorter range)"))
		return
	}
	sc, org, err := a.scopeOf(c, f)
	if err != nil {
		apierr.Write(c, err)
		return
	}
	if f.chainID != "" {
		f.chainID = a.d.ChainID(f.chainID)
		if f.chainID == "" {
			c.JSON(http.StatusOK, usageResponse{AggregateDuration: interval, OrgID: org, Metrics: []metric{}})
			return
		}
	}
	rows, err := a.store.Metrics(c.Request.Context(), sc, f, interval, groupBy)
	if errors.Is(err, ErrTooManyValues) {
		apierr.Write(c, apierr.Validation("the answer would hold more than "+strconv.Itoa(a.store.maxValues)+
			" values (one per time bucket and group); a coarser timeInterval, a shorter range, a filter or another groupBy"))
		return
	}
	if err != nil {
		apierr.Write(c, storeError(err))
		return
	}
	c.JSON(http.StatusOK, usageResponse{AggregateDuration: interval, OrgID: org, Metrics: render(rows, interval, groupBy)})
}

// logs serves getApiLogs.
func (a *API) logs(c *gin.Context) {
	r := &reader{c: c, now: a.d.Now()}
	f := r.filters()
	size := r.pageSize()
	if !r.valid() {
		return
	}
	sc, org, err := a.scopeOf(c, f)
	if err != nil {
		apierr.Write(c, err)
		return
	}
	if f.chainID != "" {
		if f.chainID = a.d.ChainID(f.chainID); f.chainID == "" {
			c.JSON(http.StatusOK, logsResponse{OrgID: org, Logs: []logEntry{}})
			return
		}
	}
	bind := a.bindingOf(c, org, f)
	var after *logCursor
	if tok := c.Query("pageToken"); tok != "" {
		cur, ok := a.openToken(tok, bind)
		if !ok {
			apierr.Write(c, apierr.Validation("pageToken must be a page token returned by the previous page of this list"))
			return
		}
		after = &cur
	}
	rows, err := a.store.Logs(c.Request.Context(), sc, f, after, size+1, a.d.Now())
	if err != nil {
		apierr.Write(c, storeError(err))
		return
	}
	resp := logsResponse{OrgID: org, Logs: make([]logEntry, 0, min(len(rows), size))}
	for i, l := range rows {
		if i == size {
			last := rows[size-1]
			resp.NextPageToken = a.sealToken(bind, logCursor{at: last.at, id: last.id})
			break
		}
		resp.Logs = append(resp.Logs, renderLog(l))
	}
	c.JSON(http.StatusOK, resp)
}

// bindingOf is what a logs page token is bound to: the caller's key, the
// scope and every filter, so a token is refused with other parameters or
// by another key.
func (a *API) bindingOf(c *gin.Context, org string, f filters) [16]byte {
	p := auth.From(c).Principal
	h := sha256.New()
	for _, s := range []string{p.KeyID, org, f.chainID, strconv.Itoa(f.status), f.requestType, f.keyID, f.route} {
		h.Write([]byte(s))
		h.Write([]byte{0})
	}
	var b [16]byte
	binary.BigEndian.PutUint64(b[:], uint64(f.from.Unix()))
	h.Write(b[:8])
	binary.BigEndian.PutUint64(b[:], uint64(f.to.Unix()))
	h.Write(b[:8])
	copy(b[:], h.Sum(nil))
	return b
}

// tokenKindLogs is the kind of a logs page token.
const tokenKindLogs = 1

func (a *API) sealToken(bind [16]byte, cur logCursor) string {
	body := append(bind[:], binary.AppendUvarint(nil, cur.at)...)
	return a.tokens.Seal(tokenKindLogs, append(body, cur.id...))
}

func (a *API) openToken(s string, bind [16]byte) (logCursor, bool) {
	r, _, err := a.tokens.Open(s, tokenKindLogs)
	if err != nil {
		return logCursor{}, false
	}
	var got [16]byte
	r.Fixed(got[:])
	at := r.Uvarint()
	var id [16]byte
	r.Fixed(id[:])
	if r.Done() != nil || got != bind {
		return logCursor{}, false
	}
	return logCursor{at: at, id: string(id[:])}, true
}

// storeError maps a read's failure to the API error.
func storeError(err error) error {
	if errors.Is(err, ErrUnavailable) {
		return apierr.Unavailable("Usage data is temporarily unavailable", err)
	}
	return apierr.Internal(err)
}

// renderLog is one LogsFormat.
func renderLog(l logRow) logEntry {
	var id uuid.UUID
	copy(id[:], l.id)
	return logEntry{
		OrgID: l.account, LogID: id.String(), EventTimestamp: l.at, APIKeyID: l.keyID, APIKeyAlias: l.keyAlias,
		HostRegion: l.region, RequestType: "data", RequestPath: l.route, APICreditsConsumed: l.units,
		RequestDurationMsecs: float64(l.durationUS) / 1000, ResponseCode: l.status, ChainID: l.chain,
		Metadata: logMetadata{IPAddress: l.ip, Host: l.host, UserAgent: l.agent},
	}
}

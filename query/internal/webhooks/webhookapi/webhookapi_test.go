package webhookapi_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/moraine-data/moraine/pkg/accountdb"
	"github.com/moraine-data/moraine/query/internal/access/plan"
	"github.com/moraine-data/moraine/query/internal/server/apierr"
	"github.com/moraine-data/moraine/query/internal/webhooks/webhookapi"
	"github.com/moraine-data/moraine/query/internal/webhooks/webhookapi/webhookapitest"
	"github.com/moraine-data/moraine/schemas/codec"
	"github.com/moraine-data/moraine/schemas/record"
)

const (
	addr1 = "0x9702230A8Ea53601f5cD2dc00fDBc13d4dF4A8c7"
	addr2 = "0xB97EF9Ef8734C71904D8002F8b6Bc66Dd9c48a6E"
	sig1  = "0xddf252ad1be2c89b69c2b068fc378daa952ba7f163c4a11628f55a4df523b3ef"
)

var uuidV4 = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)

func addrN(i int) string { return fmt.Sprintf("0x%040x", 0x1000+i) }

func createBody(addrs ...string) map[string]any {
	return map[string]any{
		"eventType": "address_activity", "url": "https://example.com/hook", "chainId": "43112",
		"metadata": map[string]any{"addresses": addrs},
	}
}

// requireError checks the contract's error body.
func requireError(t *testing.T, r webhookapitest.Response, code int, message any) {
	t.Helper()
	require.Equal(t, code, r.Code, "body %s", r.Body)
	var body struct {
		Message    any    `json:"message"`
		StatusCode int    `json:"statusCode"`
		Error      string `json:"error"`
	}
	require.NoError(t, json.Unmarshal(r.Body, &body))
	require.Equal(t, code, body.StatusCode)
	require.Equal(t, apierr.ReasonPhrase(code), body.Error)
	if message != nil {
		if m, ok := message.([]string); ok {
			got, _ := body.Message.([]any)
			var gs []string
			for _, g := range got {
				gs = append(gs, g.(string))
			}
			require.Equal(t, m, gs)
		} else {
			require.Equal(t, message, body.Message)
		}
	}
}

func TestWebhookLifecycle(t *testing.T) {
	env := webhookapitest.Start(t, webhookapitest.Options{})
	acc, key := env.NewAccount(t, plan.Pro)

	// Create: 201, the contract's shape, defaults, addresses as given.
	body := createBody(addr1, addr2, strings.ToLower(addr1))
	r := env.Do(t, "POST", "/v1/webhooks", key, body)
	require.Equal(t, http.StatusCreated, r.Code, "%s", r.Body)
	got := r.JSON(t)
	id := got["id"].(string)
	require.Regexp(t, uuidV4, id)
	createdAt := got["createdAt"].(float64)
	require.InDelta(t, float64(time.Now().UnixMilli()), createdAt, 60_000)
	require.Equal(t, map[string]any{
		"id": id, "eventType": "address_activity", "chainId": "43112",
		"metadata":           map[string]any{"addresses": []any{addr1, addr2}},
		"includeInternalTxs": false, "includeLogs": false, "url": "https://example.com/hook",
		"status": "active", "createdAt": createdAt, "name": "", "description": "",
	}, got)

	// Read own write at once.
	r = env.Do(t, "GET", "/v1/webhooks/"+id, key, nil)
	require.Equal(t, http.StatusOK, r.Code)
	require.Equal(t, got, r.JSON(t))

	// The change is on the topic.
	webhookapitest.WaitAgree(t, env.DB, env.Kafka, 5*time.Second)
	state := webhookapitest.TopicState(t, env.Kafka)
	wh := state[codec.WatchWebhookKey(id)].Value.GetWebhook()
	require.NotNil(t, wh)
	require.Equal(t, acc.ID, wh.GetAccountId())
	require.Equal(t, uint64(43112), wh.GetChainId())
	require.Equal(t, record.WebhookStatus_WEBHOOK_STATUS_ACTIVE, wh.GetStatus())
	require.NotNil(t, state[codec.WatchAddressKey(id, addr1)].Value)
	require.NotNil(t, state[codec.WatchAddressKey(id, addr2)].Value)

	// Second webhook with every optional field.
	full := createBody(addr1)
	full["name"], full["description"] = "Tokens", "Track tokens"
	full["includeLogs"], full["includeInternalTxs"] = true, true
	full["metadata"].(map[string]any)["eventSignatures"] = []string{"0x" + strings.ToUpper(sig1[2:])}
	full["unknownField"] = 1 // tolerated
	r = env.Do(t, "POST", "/v1/webhooks", key, full)
	require.Equal(t, http.StatusCreated, r.Code, "%s", r.Body)
	second := r.JSON(t)
	id2 := second["id"].(string)
	require.Equal(t, map[string]any{"addresses": []any{addr1}, "eventSignatures": []any{sig1}}, second["metadata"])
	require.Equal(t, "Tokens", second["name"])
	require.Equal(t, true, second["includeLogs"])
	require.Equal(t, true, second["includeInternalTxs"])

	// List: newest first, paged, status filter.
	r = env.Do(t, "GET", "/v1/webhooks?pageSize=1", key, nil)
	require.Equal(t, http.StatusOK, r.Code)
	page := r.JSON(t)
	require.Len(t, page["webhooks"], 1)
	require.Equal(t, id2, page["webhooks"].([]any)[0].(map[string]any)["id"])
	tok := page["nextPageToken"].(string)
	r = env.Do(t, "GET", "/v1/webhooks?pageSize=1&pageToken="+tok, key, nil)
	page = r.JSON(t)
	require.Equal(t, id, page["webhooks"].([]any)[0].(map[string]any)["id"])
	require.NotContains(t, page, "nextPageToken")
	r = env.Do(t, "GET", "/v1/webhooks", key, nil)
	require.Len(t, r.JSON(t)["webhooks"], 2)
	require.NotContains(t, r.JSON(t), "nextPageToken")

	// PATCH settings.
	r = env.Do(t, "PATCH", "/v1/webhooks/"+id, key, map[string]any{"name": "n", "description": "d", "url": "http://example.org/x", "includeLogs": true})
	require.Equal(t, http.StatusOK, r.Code, "%s", r.Body)
	p := r.JSON(t)
	require.Equal(t, "n", p["name"])
	require.Equal(t, "d", p["description"])
	require.Equal(t, "http://example.org/x", p["url"])
	require.Equal(t, true, p["includeLogs"])
	require.Equal(t, createdAt, p["createdAt"])

	// DELETE deactivates and returns the webhook; list filters by status.
	r = env.Do(t, "DELETE", "/v1/webhooks/"+id, key, nil)
	require.Equal(t, http.StatusOK, r.Code)
	require.Equal(t, "inactive", r.JSON(t)["status"])
	r = env.Do(t, "GET", "/v1/webhooks?status=inactive", key, nil)
	ws := r.JSON(t)["webhooks"].([]any)
	require.Len(t, ws, 1)
	require.Equal(t, id, ws[0].(map[string]any)["id"])
	r = env.Do(t, "GET", "/v1/webhooks?status=active", key, nil)
	require.Len(t, r.JSON(t)["webhooks"], 1)
	webhookapitest.WaitAgree(t, env.DB, env.Kafka, 5*time.Second)
	require.Equal(t, record.WebhookStatus_WEBHOOK_STATUS_INACTIVE,
		webhookapitest.TopicState(t, env.Kafka)[codec.WatchWebhookKey(id)].Value.GetWebhook().GetStatus())
	// PATCH status active reactivates.
	r = env.Do(t, "PATCH", "/v1/webhooks/"+id, key, map[string]any{"status": "active"})
	require.Equal(t, "active", r.JSON(t)["status"])

	// Addresses: add (twice is a no-op, case-insensitive), remove (absent
	// is a no-op), list with totals and pages.
	r = env.Do(t, "PATCH", "/v1/webhooks/"+id+"/addresses", key, map[string]any{"addresses": []string{addrN(1), addrN(2), strings.ToLower(addr2)}})
	require.Equal(t, http.StatusOK, r.Code, "%s", r.Body)
	require.ElementsMatch(t, []any{addr1, addr2, addrN(1), addrN(2)}, r.JSON(t)["metadata"].(map[string]any)["addresses"])
	r = env.Do(t, "PATCH", "/v1/webhooks/"+id+"/addresses", key, map[string]any{"addresses": []string{"0x" + strings.ToUpper(addr2[2:])}})
	require.Equal(t, http.StatusOK, r.Code)
	require.Len(t, r.JSON(t)["metadata"].(map[string]any)["addresses"], 4)
	r = env.Do(t, "DELETE", "/v1/webhooks/"+id+"/addresses", key, map[string]any{"addresses": []string{strings.ToLower(addr1), addrN(9)}})
	require.Equal(t, http.StatusOK, r.Code, "%s", r.Body)
	require.ElementsMatch(t, []any{addr2, addrN(1), addrN(2)}, r.JSON(t)["metadata"].(map[string]any)["addresses"])

	var listed []string
	tok = ""
	for i := 0; ; i++ {
		q := "/v1/webhooks/" + id + "/addresses?pageSize=2"
		if tok != "" {
			q += "&pageToken=" + tok
		}
		r = env.Do(t, "GET", q, key, nil)
		require.Equal(t, http.StatusOK, r.Code, "%s", r.Body)
		pg := r.JSON(t)
		require.Equal(t, 3.0, pg["totalAddresses"])
		for _, a := range pg["addresses"].([]any) {
			listed = append(listed, a.(string))
		}
		next, ok := pg["nextPageToken"].(string)
		if !ok {
			break
		}
		tok = next
		require.Less(t, i, 3)
	}
	require.ElementsMatch(t, []string{addr2, addrN(1), addrN(2)}, listed)

	webhookapitest.WaitAgree(t, env.DB, env.Kafka, 5*time.Second)
	state = webhookapitest.TopicState(t, env.Kafka)
	require.Nil(t, state[codec.WatchAddressKey(id, addr1)].Value, "removed address is a tombstone")
	require.Contains(t, state, codec.WatchAddressKey(id, addr1))

	// Shared secret: 404 before, 201 on generate, GET returns it, rotate changes it.
	r = env.Do(t, "GET", "/v1/webhooks:getSharedSecret", key, nil)
	requireError(t, r, http.StatusNotFound, nil)
	r = env.Do(t, "POST", "/v1/webhooks:generateOrRotateSharedSecret", key, nil)
	require.Equal(t, http.StatusCreated, r.Code, "%s", r.Body)
	s1 := r.JSON(t)["secret"].(string)
	require.Regexp(t, `^[0-9a-f]{64}$`, s1)
	r = env.Do(t, "GET", "/v1/webhooks:getSharedSecret", key, nil)
	require.Equal(t, http.StatusOK, r.Code)
	require.Equal(t, map[string]any{"secret": s1}, r.JSON(t))
	r = env.Do(t, "GET", "/v1/webhooks%3AgetSharedSecret", key, nil)
	require.Equal(t, http.StatusOK, r.Code, "an escaped colon is the same path")
	r = env.Do(t, "POST", "/v1/webhooks:generateOrRotateSharedSecret", key, nil)
	s2 := r.JSON(t)["secret"].(string)
	require.NotEqual(t, s1, s2)
	webhookapitest.WaitAgree(t, env.DB, env.Kafka, 5*time.Second)
	accRec := webhookapitest.TopicState(t, env.Kafka)[codec.WatchAccountKey(acc.ID)].Value.GetAccount()
	require.Equal(t, s2, accRec.GetSharedSecret())
	require.Equal(t, plan.Pro, accRec.GetPlan())
}

const msgConfirmations = "confirmations must be an integer from 0 to 256 (blocks on top of a block before its activity is delivered)"

// TestConfirmations: the confirmations extension is taken on create and
// PATCH, shown on every answer when set (absent at 0, the default, so
// answers stay the hosted service's), and carried by the webhook's address-watch record to the matcher.
func TestConfirmations(t *testing.T) {
	env := webhookapitest.Start(t, webhookapitest.Options{})
	_, key := env.NewAccount(t, plan.Free)
	r := env.Do(t, "POST", "/v1/webhooks", key, createBody(addr1))
	require.Equal(t, http.StatusCreated, r.Code, "%s", r.Body)
	require.NotContains(t, r.JSON(t), "confirmations")

	b := createBody(addr2)
	b["confirmations"] = 12
	r = env.Do(t, "POST", "/v1/webhooks", key, b)
	require.Equal(t, http.StatusCreated, r.Code, "%s", r.Body)
	id := r.JSON(t)["id"].(string)
	require.Equal(t, float64(12), r.JSON(t)["confirmations"])
	require.Equal(t, float64(12), env.Do(t, "GET", "/v1/webhooks/"+id, key, nil).JSON(t)["confirmations"])
	require.Equal(t, uint32(12), webhookapitest.TopicState(t, env.Kafka)[codec.WatchWebhookKey(id)].Value.GetWebhook().GetConfirmations())

	r = env.Do(t, "PATCH", "/v1/webhooks/"+id, key, map[string]any{"confirmations": 64})
	require.Equal(t, http.StatusOK, r.Code, "%s", r.Body)
	require.Equal(t, float64(64), r.JSON(t)["confirmations"])
	r = env.Do(t, "PATCH", "/v1/webhooks/"+id, key, map[string]any{"name": "kept"})
	require.Equal(t, float64(64), r.JSON(t)["confirmations"], "a PATCH without the field keeps it")
	require.Equal(t, uint32(64), webhookapitest.TopicState(t, env.Kafka)[codec.WatchWebhookKey(id)].Value.GetWebhook().GetConfirmations())
}

func TestValidation(t *testing.T) {
	env := webhookapitest.Start(t, webhookapitest.Options{})
	_, key := env.NewAccount(t, plan.Free)
	r := env.Do(t, "POST", "/v1/webhooks", key, createBody(addr1))
	require.Equal(t, http.StatusCreated, r.Code)
	id := r.JSON(t)["id"].(string)

	with := func(mut func(b map[string]any)) map[string]any {
		b := createBody(addr1)
		mut(b)
		return b
	}
	for _, tc := range []struct {
		name   string
		method string
		path   string
		body   any
		code   int
		msg    any
	}{
		{"not json", "POST", "/v1/webhooks", "{", 400, "Request body must be a JSON object"},
		{"empty body", "POST", "/v1/webhooks", "", 400, "Request body must be a JSON object"},
		{"array body", "POST", "/v1/webhooks", "[]", 400, "Request body must be a JSON object"},
		{"empty object", "POST", "/v1/webhooks", "{}", 400, []string{
			"eventType must be one of the following values: address_activity", "url must be a string",
			"chainId must be a string", "metadata must be an object"}},
		{"bad address", "POST", "/v1/webhooks", createBody(addr1, "0x123"), 400, []string{"Invalid address format"}},
		{"address not a string", "POST", "/v1/webhooks", with(func(b map[string]any) { b["metadata"] = map[string]any{"addresses": []any{1}} }), 400, []string{"Invalid address format"}},
		{"addresses missing", "POST", "/v1/webhooks", with(func(b map[string]any) { b["metadata"] = map[string]any{} }), 400, []string{"metadata.addresses must be an array"}},
		// A webhook that watches nothing (issue 16: it was created).
		{"addresses empty", "POST", "/v1/webhooks", createBody([]string{}...), 400, []string{"metadata.addresses must contain at least 1 elements"}},
		{"bad signature", "POST", "/v1/webhooks", with(func(b map[string]any) {
			b["metadata"].(map[string]any)["eventSignatures"] = []string{"0x1234"}
		}), 400, []string{"Invalid event signature format"}},
		{"other event type", "POST", "/v1/webhooks", with(func(b map[string]any) { b["eventType"] = "validator_activity" }), 400, []string{"eventType must be one of the following values: address_activity"}},
		{"relative url", "POST", "/v1/webhooks", with(func(b map[string]any) { b["url"] = "/hook" }), 400, []string{"url must be an absolute http or https URL"}},
		{"ftp url", "POST", "/v1/webhooks", with(func(b map[string]any) { b["url"] = "ftp://example.com/x" }), 400, []string{"url must be an absolute http or https URL"}},
		{"unknown chain", "POST", "/v1/webhooks", with(func(b map[string]any) { b["chainId"] = "1" }), 400, []string{`chainId must be a chain with webhooks enabled (GET /v1/chains?feature=webhooks lists them); "1" is not`}},
		{"chain without webhooks", "POST", "/v1/webhooks", with(func(b map[string]any) { b["chainId"] = "99999" }), 400, []string{`chainId must be a chain with webhooks enabled (GET /v1/chains?feature=webhooks lists them); "99999" is not`}},
		{"internal txs without traces", "POST", "/v1/webhooks", with(func(b map[string]any) { b["chainId"], b["includeInternalTxs"] = "4337", true }), 400, []string{"includeInternalTxs is only available on chains with traces, and chain 4337 has none"}},
		{"flag not boolean", "POST", "/v1/webhooks", with(func(b map[string]any) { b["includeLogs"] = "yes" }), 400, []string{"includeLogs must be a boolean value"}},
		{"name not string", "POST", "/v1/webhooks", with(func(b map[string]any) { b["name"] = 5 }), 400, []string{"name must be a string"}},
		{"confirmations too many", "POST", "/v1/webhooks", with(func(b map[string]any) { b["confirmations"] = 257 }), 400, []string{msgConfirmations}},
		{"confirmations negative", "POST", "/v1/webhooks", with(func(b map[string]any) { b["confirmations"] = -1 }), 400, []string{msgConfirmations}},
		{"confirmations fractional", "POST", "/v1/webhooks", with(func(b map[string]any) { b["confirmations"] = 1.5 }), 400, []string{msgConfirmations}},
		{"confirmations a string", "POST", "/v1/webhooks", with(func(b map[string]any) { b["confirmations"] = "12" }), 400, []string{msgConfirmations}},
		{"patch confirmations too many", "PATCH", "/v1/webhooks/" + id, map[string]any{"confirmations": 1000}, 400, []string{msgConfirmations}},
		{"patch bad status", "PATCH", "/v1/webhooks/" + id, map[string]any{"status": "paused"}, 400, []string{"status must be one of the following values: active, inactive"}},
		{"patch bad url", "PATCH", "/v1/webhooks/" + id, map[string]any{"url": "nope"}, 400, []string{"url must be an absolute http or https URL"}},
		{"patch not json", "PATCH", "/v1/webhooks/" + id, "x", 400, "Request body must be a JSON object"},
		{"add bad address", "PATCH", "/v1/webhooks/" + id + "/addresses", map[string]any{"addresses": []string{"0xZZ02230A8Ea53601f5cD2dc00fDBc13d4dF4A8c7"}}, 400, []string{"Invalid address format"}},
		{"add without list", "PATCH", "/v1/webhooks/" + id + "/addresses", map[string]any{}, 400, []string{"addresses must be an array"}},
		{"remove without body", "DELETE", "/v1/webhooks/" + id + "/addresses", nil, 400, "Request body must be a JSON object"},
		{"page size too big", "GET", "/v1/webhooks?pageSize=101", nil, 400, []string{"pageSize must not be greater than 100"}},
		{"page size zero", "GET", "/v1/webhooks/" + id + "/addresses?pageSize=0", nil, 400, []string{"pageSize must not be less than 1"}},
		{"page size not int", "GET", "/v1/webhooks?pageSize=1.5", nil, 400, []string{"pageSize must be an integer number"}},
		{"bad status filter", "GET", "/v1/webhooks?status=paused", nil, 400, []string{"status must be one of the following values: active, inactive"}},
		{"forged page token", "GET", "/v1/webhooks?pageToken=abc", nil, 400, []string{"pageToken must be a page token returned by the previous page of this list"}},
		{"unknown webhook", "GET", "/v1/webhooks/00000000-0000-4000-8000-000000000000", nil, 404, "Webhook not found"},
		{"unknown webhook patch", "PATCH", "/v1/webhooks/nope", map[string]any{"name": "x"}, 404, "Webhook not found"},
		{"unknown webhook addresses", "GET", "/v1/webhooks/nope/addresses", nil, 404, "Webhook not found"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			requireError(t, env.Do(t, tc.method, tc.path, key, tc.body), tc.code, tc.msg)
		})
	}

	t.Run("blockchain id accepted, evm id stored", func(t *testing.T) {
		r := env.Do(t, "POST", "/v1/webhooks", key, with(func(b map[string]any) {
			b["chainId"] = "yH8D7ThNJkxmtkuv2jgBa4P1Rn3Qpr4pPr7QYNfcdoS6k6HWp"
			b["name"] = "fuji"
		}))
		require.Equal(t, http.StatusCreated, r.Code, "%s", r.Body)
		require.Equal(t, "43113", r.JSON(t)["chainId"])
	})
	t.Run("address list token of another webhook", func(t *testing.T) {
		r := env.Do(t, "PATCH", "/v1/webhooks/"+id+"/addresses", key, map[string]any{"addresses": []string{addrN(1), addrN(2)}})
		require.Equal(t, 200, r.Code)
		tok := env.Do(t, "GET", "/v1/webhooks/"+id+"/addresses?pageSize=1", key, nil).JSON(t)["nextPageToken"].(string)
		requireError(t, env.Do(t, "GET", "/v1/webhooks?pageToken="+tok, key, nil), 400, []string{"pageToken must be a page token returned by the previous page of this list"})
	})
}

func TestAuthAndIsolation(t *testing.T) {
	env := webhookapitest.Start(t, webhookapitest.Options{})
	_, keyA := env.NewAccount(t, plan.Free)
	_, keyB := env.NewAccount(t, plan.Free)
	r := env.Do(t, "POST", "/v1/webhooks", keyA, createBody(addr1))
	require.Equal(t, http.StatusCreated, r.Code)
	before := r.JSON(t)
	id := before["id"].(string)
	r = env.Do(t, "POST", "/v1/webhooks:generateOrRotateSharedSecret", keyA, nil)
	secretA := r.JSON(t)["secret"]

	routes := []struct{ method, path string }{
		{"POST", "/v1/webhooks"}, {"GET", "/v1/webhooks"},
		{"GET", "/v1/webhooks/" + id}, {"PATCH", "/v1/webhooks/" + id}, {"DELETE", "/v1/webhooks/" + id},
		{"GET", "/v1/webhooks/" + id + "/addresses"}, {"PATCH", "/v1/webhooks/" + id + "/addresses"}, {"DELETE", "/v1/webhooks/" + id + "/addresses"},
		{"POST", "/v1/webhooks:generateOrRotateSharedSecret"}, {"GET", "/v1/webhooks:getSharedSecret"},
	}
	unauthorized := map[string]any{"message": "Unauthorized", "statusCode": 401.0, "error": "Unauthorized"}
	for _, rt := range routes {
		t.Run("no key "+rt.method+" "+rt.path, func(t *testing.T) {
			r := env.Do(t, rt.method, rt.path, "", map[string]any{"addresses": []string{addr2}})
			require.Equal(t, 401, r.Code)
			require.Equal(t, unauthorized, r.JSON(t))
		})
		t.Run("unknown key "+rt.method+" "+rt.path, func(t *testing.T) {
			r := env.Do(t, rt.method, rt.path, "mk_"+strings.Repeat("0", 64), map[string]any{"addresses": []string{addr2}})
			require.Equal(t, 401, r.Code)
			require.Equal(t, unauthorized, r.JSON(t))
		})
	}
	t.Run("x-data-api-key works, mismatched headers do not", func(t *testing.T) {
		req, _ := http.NewRequest("GET", env.URL+"/v1/webhooks/"+id, nil)
		req.Header.Set("x-data-api-key", keyA)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, 200, resp.StatusCode)
		req.Header.Set("x-glacier-api-key", keyB)
		resp, err = http.DefaultClient.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, 401, resp.StatusCode)
	})

	// B cannot see or change A's webhook: 404 everywhere, A's list and
	// secret untouched.
	for _, rt := range routes[2:8] {
		t.Run("other account "+rt.method+" "+rt.path, func(t *testing.T) {
			r := env.Do(t, rt.method, rt.path, keyB, map[string]any{"addresses": []string{addr2}, "name": "hijack"})
			requireError(t, r, 404, "Webhook not found")
		})
	}
	r = env.Do(t, "GET", "/v1/webhooks", keyB, nil)
	require.Equal(t, map[string]any{"webhooks": []any{}}, r.JSON(t))
	requireError(t, env.Do(t, "GET", "/v1/webhooks:getSharedSecret", keyB, nil), 404, nil)
	require.Equal(t, before, env.Do(t, "GET", "/v1/webhooks/"+id, keyA, nil).JSON(t))
	require.Equal(t, secretA, env.Do(t, "GET", "/v1/webhooks:getSharedSecret", keyA, nil).JSON(t)["secret"])
	// A's page token is refused to B.
	env.Do(t, "POST", "/v1/webhooks", keyA, createBody(addr2))
	tok := env.Do(t, "GET", "/v1/webhooks?pageSize=1", keyA, nil).JSON(t)["nextPageToken"].(string)
	requireError(t, env.Do(t, "GET", "/v1/webhooks?pageSize=1&pageToken="+tok, keyB, nil), 400, nil)
}

func TestPlanLimits(t *testing.T) {
	plans, err := plan.Parse([]byte(`{"plans":{"free":{"webhooksPerAccount":3}}}`))
	require.NoError(t, err)
	env := webhookapitest.Start(t, webhookapitest.Options{Plans: plans})
	_, key := env.NewAccount(t, plan.Free)

	// Six addresses at creation: refused.
	six := []string{addrN(1), addrN(2), addrN(3), addrN(4), addrN(5), addrN(6)}
	requireError(t, env.Do(t, "POST", "/v1/webhooks", key, createBody(six...)), 403, "The free plan allows at most 5 addresses per webhook")
	// Five, then the sixth: refused; re-adding a watched one is fine.
	r := env.Do(t, "POST", "/v1/webhooks", key, createBody(six[:5]...))
	require.Equal(t, http.StatusCreated, r.Code, "%s", r.Body)
	id := r.JSON(t)["id"].(string)
	requireError(t, env.Do(t, "PATCH", "/v1/webhooks/"+id+"/addresses", key, map[string]any{"addresses": six[5:]}), 403,
		"The free plan allows at most 5 addresses per webhook; this webhook has 5 and the request adds 1")
	r = env.Do(t, "PATCH", "/v1/webhooks/"+id+"/addresses", key, map[string]any{"addresses": six[:2]})
	require.Equal(t, 200, r.Code)
	// Remove one, then the sixth fits.
	require.Equal(t, 200, env.Do(t, "DELETE", "/v1/webhooks/"+id+"/addresses", key, map[string]any{"addresses": six[:1]}).Code)
	require.Equal(t, 200, env.Do(t, "PATCH", "/v1/webhooks/"+id+"/addresses", key, map[string]any{"addresses": six[5:]}).Code)
	require.Equal(t, 5.0, env.Do(t, "GET", "/v1/webhooks/"+id+"/addresses", key, nil).JSON(t)["totalAddresses"])

	// Active webhooks per account (3 here).
	require.Equal(t, 201, env.Do(t, "POST", "/v1/webhooks", key, createBody(addr1)).Code)
	r = env.Do(t, "POST", "/v1/webhooks", key, createBody(addr2))
	require.Equal(t, 201, r.Code)
	third := r.JSON(t)["id"].(string)
	const full = "The free plan allows at most 3 active webhooks per account; deactivate one (DELETE /v1/webhooks/{id}) first"
	requireError(t, env.Do(t, "POST", "/v1/webhooks", key, createBody(addrN(7))), 403, full)
	// Deleting (deactivating) one frees its place (issue 16: deleted
	// webhooks used up the quota for good).
	require.Equal(t, 200, env.Do(t, "DELETE", "/v1/webhooks/"+third, key, nil).Code)
	r = env.Do(t, "POST", "/v1/webhooks", key, createBody(addrN(7)))
	require.Equal(t, 201, r.Code, "%s", r.Body)
	fourth := r.JSON(t)["id"].(string)
	// Reactivating takes a place again: refused while the account is full,
	// and a PATCH that leaves the status alone is not.
	requireError(t, env.Do(t, "PATCH", "/v1/webhooks/"+third, key, map[string]any{"status": "active"}), 403, full)
	require.Equal(t, 200, env.Do(t, "PATCH", "/v1/webhooks/"+third, key, map[string]any{"name": "still inactive"}).Code)
	require.Equal(t, 200, env.Do(t, "PATCH", "/v1/webhooks/"+fourth, key, map[string]any{"status": "active"}).Code, "already active")
	require.Equal(t, 200, env.Do(t, "DELETE", "/v1/webhooks/"+fourth, key, nil).Code)
	r = env.Do(t, "PATCH", "/v1/webhooks/"+third, key, map[string]any{"status": "active"})
	require.Equal(t, 200, r.Code, "%s", r.Body)
	require.Equal(t, "active", r.JSON(t)["status"])
	// Create and delete many more than the quota: never stuck.
	for i := range 6 {
		r = env.Do(t, "POST", "/v1/webhooks", key, createBody(addrN(1)))
		requireError(t, r, 403, full)
		require.Equal(t, 200, env.Do(t, "DELETE", "/v1/webhooks/"+third, key, nil).Code)
		r = env.Do(t, "POST", "/v1/webhooks", key, createBody(addrN(20+i)))
		require.Equal(t, 201, r.Code, "%s", r.Body)
		third = r.JSON(t)["id"].(string)
	}
	active := env.Do(t, "GET", "/v1/webhooks?status=active", key, nil).JSON(t)["webhooks"].([]any)
	require.Len(t, active, 3)
}

func TestCreateRetryIsDeduplicated(t *testing.T) {
	env := webhookapitest.Start(t, webhookapitest.Options{})
	_, key := env.NewAccount(t, plan.Free)
	b := createBody(addr1, addr2)
	r1 := env.Do(t, "POST", "/v1/webhooks", key, b)
	require.Equal(t, 201, r1.Code)
	// Same request (addresses in another order and case): same webhook.
	r2 := env.Do(t, "POST", "/v1/webhooks", key, createBody(strings.ToLower(addr2), addr1))
	require.Equal(t, 201, r2.Code)
	require.Equal(t, r1.JSON(t)["id"], r2.JSON(t)["id"])
	// Any difference makes a new one.
	b["name"] = "other"
	r3 := env.Do(t, "POST", "/v1/webhooks", key, b)
	require.NotEqual(t, r1.JSON(t)["id"], r3.JSON(t)["id"])
	require.Len(t, env.Do(t, "GET", "/v1/webhooks", key, nil).JSON(t)["webhooks"], 2)
}

// TestCreateDedupeOnlyReturnsAnEqualWebhook: within the dedupe window, an
// identical create answers with the earlier webhook only while that one is
// still what the request asks for (issue 16: it answered with a webhook
// deleted or changed since).
func TestCreateDedupeOnlyReturnsAnEqualWebhook(t *testing.T) {
	env := webhookapitest.Start(t, webhookapitest.Options{})
	_, key := env.NewAccount(t, plan.Growth)
	create := func() map[string]any {
		t.Helper()
		r := env.Do(t, "POST", "/v1/webhooks", key, createBody(addr1))
		require.Equal(t, 201, r.Code, "%s", r.Body)
		return r.JSON(t)
	}
	first := create()
	id := first["id"].(string)
	require.Equal(t, id, create()["id"], "a retry")

	// Deleted since: a new, active webhook.
	require.Equal(t, 200, env.Do(t, "DELETE", "/v1/webhooks/"+id, key, nil).Code)
	second := create()
	require.NotEqual(t, id, second["id"])
	require.Equal(t, "active", second["status"])
	id = second["id"].(string)

	// Renamed, pointed elsewhere, or given other addresses since: a new one
	// that is what was asked for.
	for _, change := range []func(){
		func() { env.Do(t, "PATCH", "/v1/webhooks/"+id, key, map[string]any{"name": "renamed"}) },
		func() {
			env.Do(t, "PATCH", "/v1/webhooks/"+id, key, map[string]any{"url": "https://example.org/elsewhere"})
		},
		func() {
			env.Do(t, "PATCH", "/v1/webhooks/"+id+"/addresses", key, map[string]any{"addresses": []string{addr2}})
		},
		func() { env.Do(t, "PATCH", "/v1/webhooks/"+id, key, map[string]any{"includeLogs": true}) },
	} {
		change()
		next := create()
		require.NotEqual(t, id, next["id"])
		require.Equal(t, "https://example.com/hook", next["url"])
		require.Equal(t, "", next["name"])
		require.Equal(t, false, next["includeLogs"])
		require.Equal(t, []any{addr1}, next["metadata"].(map[string]any)["addresses"])
		id = next["id"].(string)
		require.Equal(t, id, create()["id"], "and a retry of that one is deduplicated again")
	}
	// Changed and changed back: equal again, so a retry still finds it.
	env.Do(t, "PATCH", "/v1/webhooks/"+id, key, map[string]any{"name": "tmp"})
	env.Do(t, "PATCH", "/v1/webhooks/"+id, key, map[string]any{"name": ""})
	require.Equal(t, id, create()["id"])
}

// TestWebhookURLPolicy: the delivery target policy applies when a URL is
// accepted, on create and on PATCH, with a 400 naming the reason; a
// reactivation checks the URL again. The spellings themselves are tested
// in pkg/guard.
func TestWebhookURLPolicy(t *testing.T) {
	env := webhookapitest.Start(t, webhookapitest.Options{})
	_, key := env.NewAccount(t, plan.Growth)
	withURL := func(u string) map[string]any {
		b := createBody(addr1)
		b["url"] = u
		return b
	}
	for _, tc := range []struct{ url, msg string }{
		{"http://169.254.169.254/latest/meta-data", "url host 169.254.169.254 is a link-local address (this includes the cloud metadata service); webhook URLs must reach the public internet"},
		{"http://metadata.google.internal/computeMetadata/v1/", "url host metadata.google.internal is an internal name; webhook URLs must reach the public internet"},
		{"http://127.0.0.1:8080/hook", "url host 127.0.0.1 is a loopback address; webhook URLs must reach the public internet"},
		{"http://localhost/hook", "url host localhost is an internal name; webhook URLs must reach the public internet"},
		{"http://[::1]/hook", "url host ::1 is a loopback address; webhook URLs must reach the public internet"},
		{"http://[::ffff:127.0.0.1]/hook", "url host ::ffff:127.0.0.1 (127.0.0.1) is a loopback address; webhook URLs must reach the public internet"},
		{"http://2130706433/hook", "url host 2130706433 (127.0.0.1) is a loopback address; webhook URLs must reach the public internet"},
		{"http://0x7f000001/hook", "url host 0x7f000001 (127.0.0.1) is a loopback address; webhook URLs must reach the public internet"},
		{"http://127.1/hook", "url host 127.1 (127.0.0.1) is a loopback address; webhook URLs must reach the public internet"},
		{"http://0.0.0.0/hook", "url host 0.0.0.0 is an unspecified (0.0.0.0 or ::) address; webhook URLs must reach the public internet"},
		{"http://10.0.0.1/hook", "url host 10.0.0.1 is a private network address; webhook URLs must reach the public internet"},
		{"http://172.16.0.1/hook", "url host 172.16.0.1 is a private network address; webhook URLs must reach the public internet"},
		{"http://192.168.1.1/hook", "url host 192.168.1.1 is a private network address; webhook URLs must reach the public internet"},
		{"http://100.64.0.1/hook", "url host 100.64.0.1 is a shared (carrier-grade NAT) address; webhook URLs must reach the public internet"},
		{"http://[fe80::1]/hook", "url host fe80::1 is a link-local address (this includes the cloud metadata service); webhook URLs must reach the public internet"},
		{"https://example.com:99999/", "url port 99999 is outside 1-65535"},
		{"https://no-such-host.invalid/hook", "url host no-such-host.invalid does not resolve to an address"},
	} {
		requireError(t, env.Do(t, "POST", "/v1/webhooks", key, withURL(tc.url)), 400, []string{tc.msg})
	}
	r := env.Do(t, "POST", "/v1/webhooks", key, withURL("https://hooks.example.com/in"))
	require.Equal(t, 201, r.Code, "%s", r.Body)
	id := r.JSON(t)["id"].(string)
	requireError(t, env.Do(t, "PATCH", "/v1/webhooks/"+id, key, map[string]any{"url": "http://169.254.169.254/"}), 400,
		[]string{"url host 169.254.169.254 is a link-local address (this includes the cloud metadata service); webhook URLs must reach the public internet"})
	require.Equal(t, "https://hooks.example.com/in", env.Do(t, "GET", "/v1/webhooks/"+id, key, nil).JSON(t)["url"], "unchanged")

	// A webhook stored with a URL the policy refuses (written before the
	// policy applied at accept time) cannot be reactivated with it.
	require.Equal(t, 200, env.Do(t, "DELETE", "/v1/webhooks/"+id, key, nil).Code)
	w, err := env.DB.Webhook(t.Context(), webhookAccount(t, env, key, id), id)
	require.NoError(t, err)
	w.URL, w.Version = "http://10.1.1.1/old", w.Version+1
	require.NoError(t, env.DB.PutWebhook(t.Context(), w))
	requireError(t, env.Do(t, "PATCH", "/v1/webhooks/"+id, key, map[string]any{"status": "active"}), 400,
		[]string{"url host 10.1.1.1 is a private network address; webhook URLs must reach the public internet"})
	r = env.Do(t, "PATCH", "/v1/webhooks/"+id, key, map[string]any{"status": "active", "url": "https://example.net/new"})
	require.Equal(t, 200, r.Code, "%s", r.Body)
	require.Equal(t, "active", r.JSON(t)["status"])

	// With private targets allowed (the development stack), the same URLs
	// are accepted: the flag is delivery's.
	cfg := webhookapi.DefaultConfig()
	cfg.AllowPrivateTargets = true
	dev := webhookapitest.Start(t, webhookapitest.Options{Webhooks: cfg})
	_, devKey := dev.NewAccount(t, plan.Growth)
	for _, u := range []string{"http://127.0.0.1:9999/hook", "http://[::1]:9999/", "http://169.254.169.254/", "http://10.0.0.1/"} {
		r := dev.Do(t, "POST", "/v1/webhooks", devKey, withURL(u))
		require.Equal(t, 201, r.Code, "%s: %s", u, r.Body)
	}
	requireError(t, dev.Do(t, "POST", "/v1/webhooks", devKey, withURL("http://127.1/")), 400,
		[]string{"url host 127.1 is an IPv4 address in a non-standard form; write it as 127.0.0.1"})
}

// webhookAccount finds the account id of key's webhook id.
func webhookAccount(t *testing.T, env *webhookapitest.Env, key, id string) string {
	t.Helper()
	accs, err := env.DB.Accounts(t.Context())
	require.NoError(t, err)
	for _, a := range accs {
		if _, err := env.DB.Webhook(t.Context(), a.ID, id); err == nil {
			return a.ID
		}
	}
	t.Fatalf("no account has webhook %s", id)
	return ""
}

func TestRateLimitBurstPastFreeBudget(t *testing.T) {
	env := webhookapitest.Start(t, webhookapitest.Options{})
	_, key := env.NewAccount(t, plan.Free)
	// GET /v1/webhooks:getSharedSecret costs 10 CU; free has 8,000 per
	// minute: about 800 pass (fewer if the burst straddles a minute).
	var ok, limited atomic.Int64
	var first429 webhookapitest.Response
	var once sync.Once
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	for i := 0; i < 1700 && limited.Load() < 5; i++ {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			r := env.Do(t, "GET", "/v1/webhooks:getSharedSecret", key, nil)
			require.Equal(t, "8000;w=60, 2000000;w=86400", r.Header.Get("ratelimit-policy"))
			switch r.Code {
			case 404:
				ok.Add(1)
				rem, err := strconv.Atoi(r.Header.Get("ratelimit-remaining"))
				require.NoError(t, err)
				require.GreaterOrEqual(t, rem, 0)
				require.Equal(t, "8000", r.Header.Get("ratelimit-limit"))
			case 429:
				limited.Add(1)
				once.Do(func() { first429 = r })
			default:
				t.Errorf("status %d", r.Code)
			}
		}()
	}
	wg.Wait()
	require.Positive(t, limited.Load(), "no 429 after %d requests", ok.Load())
	require.GreaterOrEqual(t, ok.Load(), int64(800))
	requireError(t, first429, 429, nil)
	require.Equal(t, "0", first429.Header.Get("ratelimit-remaining"))
	require.Equal(t, "8000", first429.Header.Get("ratelimit-limit"))
	secs, err := strconv.Atoi(first429.Header.Get("retry-after"))
	require.NoError(t, err)
	require.True(t, secs >= 1 && secs <= 60, "retry-after %d", secs)
	require.Equal(t, first429.Header.Get("retry-after"), first429.Header.Get("ratelimit-reset"))
	// Another account is not affected.
	_, other := env.NewAccount(t, plan.Free)
	require.Equal(t, 404, env.Do(t, "GET", "/v1/webhooks:getSharedSecret", other, nil).Code)
}

// failingPublisher refuses every produce: the API must still acknowledge,
// and the reconciler must publish.
type failingPublisher struct{ failed atomic.Int64 }

func (f *failingPublisher) Publish(context.Context, []*kgo.Record) error {
	f.failed.Add(1)
	return errors.New("broker unreachable (test)")
}

func TestChangesAcknowledgedWhenKafkaFailsAreReconciled(t *testing.T) {
	fp := &failingPublisher{}
	env := webhookapitest.Start(t, webhookapitest.Options{WrapPublisher: func(webhookapi.Publisher) webhookapi.Publisher { return fp }})
	_, key := env.NewAccount(t, plan.Free)
	r := env.Do(t, "POST", "/v1/webhooks", key, createBody(addr1, addr2))
	require.Equal(t, http.StatusCreated, r.Code)
	id := r.JSON(t)["id"].(string)
	require.Equal(t, 200, env.Do(t, "DELETE", "/v1/webhooks/"+id+"/addresses", key, map[string]any{"addresses": []string{addr1}}).Code)
	require.Equal(t, 200, env.Do(t, "DELETE", "/v1/webhooks/"+id, key, nil).Code)
	require.Equal(t, 201, env.Do(t, "POST", "/v1/webhooks:generateOrRotateSharedSecret", key, nil).Code)
	require.Equal(t, int64(4), fp.failed.Load())
	webhookapitest.WaitAgree(t, env.DB, env.Kafka, 10*time.Second)
	st := webhookapitest.TopicState(t, env.Kafka)
	require.Equal(t, record.WebhookStatus_WEBHOOK_STATUS_INACTIVE, st[codec.WatchWebhookKey(id)].Value.GetWebhook().GetStatus())
	require.NotContains(t, webhookapitest.Live(st), codec.WatchAddressKey(id, addr1))
}

func TestLargeAddressListPages(t *testing.T) {
	env := webhookapitest.Start(t, webhookapitest.Options{})
	_, key := env.NewAccount(t, plan.Enterprise)
	var all []string
	for i := range 2500 {
		all = append(all, fmt.Sprintf("0x%040x", uint64(i+1)*0x9e3779b97f4a7c15))
	}
	r := env.Do(t, "POST", "/v1/webhooks", key, createBody(all[:1000]...))
	require.Equal(t, 201, r.Code)
	id := r.JSON(t)["id"].(string)
	r = env.Do(t, "PATCH", "/v1/webhooks/"+id+"/addresses", key, map[string]any{"addresses": all[1000:]})
	require.Equal(t, 200, r.Code)
	require.Len(t, r.JSON(t)["metadata"].(map[string]any)["addresses"], 2500)
	var got []string
	tok := ""
	for {
		q := "/v1/webhooks/" + id + "/addresses?pageSize=100"
		if tok != "" {
			q += "&pageToken=" + tok
		}
		pg := env.Do(t, "GET", q, key, nil).JSON(t)
		require.Equal(t, 2500.0, pg["totalAddresses"])
		for _, a := range pg["addresses"].([]any) {
			got = append(got, a.(string))
		}
		next, ok := pg["nextPageToken"].(string)
		if !ok {
			break
		}
		tok = next
	}
	sort.Strings(all)
	require.Equal(t, all, got)
	webhookapitest.WaitAgree(t, env.DB, env.Kafka, 10*time.Second)
}

// TestDeliveriesListing: GET /v1/webhooks/{id}/deliveries pages the
// delivery log newest first with signed tokens, shows only the caller's
// webhooks (404 otherwise) and omits absent optional fields.
func TestDeliveriesListing(t *testing.T) {
	env := webhookapitest.Start(t, webhookapitest.Options{})
	_, key := env.NewAccount(t, plan.Pro)
	_, otherKey := env.NewAccount(t, plan.Pro)
	r := env.Do(t, "POST", "/v1/webhooks", key, createBody(addr1))
	require.Equal(t, http.StatusCreated, r.Code)
	id := r.JSON(t)["id"].(string)
	r = env.Do(t, "POST", "/v1/webhooks", key, createBody(addr2))
	other := r.JSON(t)["id"].(string)

	now := uint64(time.Now().UnixMilli())
	var rows []accountdb.Delivery
	for i := range 25 {
		d := accountdb.Delivery{
			WebhookID: id, MessageID: fmt.Sprintf("m-%02d", i/2), Attempt: uint8(1 + i%2), AccountID: "a", ChainID: 43112,
			TxHash: "0x01", Status: 200, Result: accountdb.ResultSuccess, LatencyMs: uint32(i), AttemptedAt: now - uint64(25-i)*1000,
		}
		if i%2 == 0 {
			d.Status, d.Result, d.Error, d.NextAttemptAt = 503, accountdb.ResultHTTPError, "HTTP 503", d.AttemptedAt+10_000
		}
		rows = append(rows, d)
	}
	rows = append(rows, accountdb.Delivery{WebhookID: other, MessageID: "x", Attempt: 1, AttemptedAt: now})
	require.NoError(t, env.DB.PutDeliveries(context.Background(), rows))

	var got []map[string]any
	token := ""
	for page := 0; ; page++ {
		path := "/v1/webhooks/" + id + "/deliveries?pageSize=10"
		if token != "" {
			path += "&pageToken=" + token
		}
		r := env.Do(t, "GET", path, key, nil)
		require.Equal(t, http.StatusOK, r.Code, "%s", r.Body)
		var body struct {
			Deliveries    []map[string]any `json:"deliveries"`
			NextPageToken *string          `json:"nextPageToken"`
		}
		require.NoError(t, json.Unmarshal(r.Body, &body))
		got = append(got, body.Deliveries...)
		if body.NextPageToken == nil {
			require.Equal(t, 2, page)
			break
		}
		token = *body.NextPageToken
	}
	require.Len(t, got, 25)
	for i, d := range got {
		src := rows[24-i] // newest first
		require.Equal(t, src.MessageID, d["messageId"])
		require.EqualValues(t, src.Attempt, d["attempt"])
		require.EqualValues(t, src.Status, d["status"])
		require.Equal(t, src.Result, d["result"])
		require.EqualValues(t, src.LatencyMs, d["latencyMs"])
		require.EqualValues(t, src.AttemptedAt, d["attemptedAt"])
		if src.Error == "" {
			require.NotContains(t, d, "error")
			require.NotContains(t, d, "nextAttemptAt")
		} else {
			require.Equal(t, src.Error, d["error"])
			require.EqualValues(t, src.NextAttemptAt, d["nextAttemptAt"])
		}
	}

	// Default page size 10; another account's webhook and an unknown id
	// are 404; a token of another webhook or account is refused.
	r = env.Do(t, "GET", "/v1/webhooks/"+id+"/deliveries", key, nil)
	require.Equal(t, http.StatusOK, r.Code)
	first := r.JSON(t)
	require.Len(t, first["deliveries"], 10)
	tok := first["nextPageToken"].(string)
	requireError(t, env.Do(t, "GET", "/v1/webhooks/"+id+"/deliveries", otherKey, nil), http.StatusNotFound, "Webhook not found")
	requireError(t, env.Do(t, "GET", "/v1/webhooks/6f1c7a52-7e8e-4a39-9d59-2f0f4c8b1a01/deliveries", key, nil), http.StatusNotFound, "Webhook not found")
	requireError(t, env.Do(t, "GET", "/v1/webhooks/"+other+"/deliveries?pageToken="+tok, key, nil), http.StatusBadRequest,
		[]string{"pageToken must be a page token returned by the previous page of this list"})
	requireError(t, env.Do(t, "GET", "/v1/webhooks/"+id+"/deliveries?pageSize=101", key, nil), http.StatusBadRequest,
		[]string{"pageSize must not be greater than 100"})
	requireError(t, env.Do(t, "GET", "/v1/webhooks/"+id+"/deliveries", "", nil), http.StatusUnauthorized, nil)
	r = env.Do(t, "GET", "/v1/webhooks/"+other+"/deliveries", key, nil)
	require.Equal(t, http.StatusOK, r.Code)
	require.Len(t, r.JSON(t)["deliveries"], 1)
	require.NotContains(t, r.JSON(t), "nextPageToken")
}

// TestDeliveriesHideConnectionDetails: for attempts that got no HTTP
// response, the delivery log shows the class of failure only, without the
// socket's words or the time the failure took (they tell open, closed and
// filtered ports apart); answers over HTTP keep status, latency and text.
func TestDeliveriesHideConnectionDetails(t *testing.T) {
	env := webhookapitest.Start(t, webhookapitest.Options{})
	_, key := env.NewAccount(t, plan.Pro)
	r := env.Do(t, "POST", "/v1/webhooks", key, createBody(addr1))
	require.Equal(t, http.StatusCreated, r.Code)
	id := r.JSON(t)["id"].(string)
	now := uint64(time.Now().UnixMilli())
	row := func(i int, result string, status uint16, latency uint32, text string) accountdb.Delivery {
		return accountdb.Delivery{WebhookID: id, MessageID: fmt.Sprintf("m-%d", i), Attempt: 1, AccountID: "a", ChainID: 43112,
			TxHash: "0x01", Status: status, Result: result, LatencyMs: latency, Error: text, AttemptedAt: now - uint64(10-i)*1000}
	}
	require.NoError(t, env.DB.PutDeliveries(context.Background(), []accountdb.Delivery{
		row(0, accountdb.ResultNetwork, 0, 1, `dial tcp 10.0.0.7:22: connect: connection refused`),
		row(1, accountdb.ResultNetwork, 0, 3012, `dial tcp 10.0.0.7:23: connect: no route to host`),
		row(2, accountdb.ResultNetwork, 0, 4, `net/http: HTTP/1.x transport connection broken: malformed HTTP response "SSH-2.0-OpenSSH_9.2"`),
		row(3, accountdb.ResultRefusedTarget, 0, 0, `refused target address 169.254.169.254 (link-local; allow with --delivery.allow-private-targets)`),
		row(4, accountdb.ResultTimeout, 0, 10001, `no response within the attempt timeout: context deadline exceeded`),
		row(5, accountdb.ResultHTTPError, 404, 12, `HTTP 404: not found`),
		row(6, accountdb.ResultSuccess, 200, 9, ``),
	}))
	var body struct {
		Deliveries []map[string]any `json:"deliveries"`
	}
	r = env.Do(t, "GET", "/v1/webhooks/"+id+"/deliveries", key, nil)
	require.Equal(t, http.StatusOK, r.Code)
	require.NoError(t, json.Unmarshal(r.Body, &body))
	type shown struct {
		Result    string
		Status    float64
		LatencyMs float64
		Error     any
	}
	var got []shown
	for _, d := range body.Deliveries {
		got = append(got, shown{d["result"].(string), d["status"].(float64), d["latencyMs"].(float64), d["error"]})
	}
	network := "could not connect to the endpoint or read its response (DNS, connection, TLS or protocol failure)"
	require.Equal(t, []shown{
		{"success", 200, 9, nil},
		{"http_error", 404, 12, "HTTP 404: not found"},
		{"timeout", 0, 10001, "no response within the attempt timeout"},
		{"refused_target", 0, 0, "the endpoint's address is refused by the delivery policy (loopback, private, link-local or another internal address)"},
		{"network", 0, 0, network},
		{"network", 0, 0, network},
		{"network", 0, 0, network},
	}, got)
}

// TestHeadAndPayloadTooLarge: HEAD answers on every webhook GET route as
// on the data routes (Express answers HEAD for GET routes), with the same
// status and no body; a body over --webhooks.max-body-bytes is a 413 with
// Node's reason phrase (issue 16: 404 for HEAD; "Request Entity Too
// Large").
func TestHeadAndPayloadTooLarge(t *testing.T) {
	cfg := webhookapi.DefaultConfig()
	cfg.MaxBodyBytes = 1024
	env := webhookapitest.Start(t, webhookapitest.Options{Webhooks: cfg})
	_, key := env.NewAccount(t, plan.Free)
	r := env.Do(t, "POST", "/v1/webhooks", key, createBody(addr1))
	require.Equal(t, http.StatusCreated, r.Code)
	id := r.JSON(t)["id"].(string)
	require.Equal(t, http.StatusCreated, env.Do(t, "POST", "/v1/webhooks:generateOrRotateSharedSecret", key, nil).Code)
	for _, p := range []string{"/v1/webhooks", "/v1/webhooks/" + id, "/v1/webhooks/" + id + "/addresses",
		"/v1/webhooks/" + id + "/deliveries", "/v1/webhooks:getSharedSecret"} {
		r := env.Do(t, "HEAD", p, key, nil)
		require.Equal(t, http.StatusOK, r.Code, p)
		require.Empty(t, r.Body, p)
		require.Equal(t, http.StatusUnauthorized, env.Do(t, "HEAD", p, "", nil).Code, p)
	}
	require.Equal(t, http.StatusNotFound, env.Do(t, "HEAD", "/v1/webhooks/00000000-0000-4000-8000-000000000000", key, nil).Code)

	big := createBody(addr1)
	big["description"] = strings.Repeat("x", 2000)
	r = env.Do(t, "POST", "/v1/webhooks", key, big)
	requireError(t, r, http.StatusRequestEntityTooLarge, "Request body larger than 1024 bytes")
	require.Contains(t, string(r.Body), `"error":"Payload Too Large"`)
}

package export

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/moraine-data/moraine/pkg/chains"
)

// Operation types and statuses (OpenAPI OperationType, OperationStatus,
// OperationStatusCode).
const (
	typeEVM = "TRANSACTION_EXPORT_EVM"

	statusRunning   = "RUNNING"
	statusCompleted = "COMPLETED"
	statusWarning   = "COMPLETED_WITH_WARNING"
	statusFailed    = "FAILED"

	codeInvalid   = "ErrInvalidRequest"
	codeInternal  = "ErrInternal"
	codeTruncated = "WarnTruncatedExport"
)

// primaryNetworkTypes are the hosted export types moraine does not serve.
var primaryNetworkTypes = []string{"TRANSACTION_EXPORT_PRIMARY_NETWORK", "TRANSACTION_EXPORT_PRIMARY_NETWORK_STAKING",
	"TRANSACTION_EXPORT_PRIMARY_NETWORK_SIMPLE"}

// spec is a validated job: what the worker exports. It is stored as JSON in
// the operation's row.
type spec struct {
	// Addresses are 0x + 40 lowercase hex, without repeats.
	Addresses []string `json:"addresses"`
	// Chains are decimal EVM chain ids of configured chains.
	Chains []string `json:"chains"`
	// First and Last are UTC days, YYYY-MM-DD, both included.
	First string `json:"firstDate"`
	Last  string `json:"lastDate"`
	// Limit is the most transactions the export holds (the plan's).
	Limit int `json:"limit"`
}

var addressRe = regexp.MustCompile(`^0[xX][0-9a-fA-F]{40}$`)

// limits are what a request may ask.
type limits struct {
	maxDays, maxAddresses int
	today                 time.Time
}

// parseRequest validates a CreateEvmTransactionExportRequest; the messages
// of a 400 in class-validator's manner, all of them at once.
func parseRequest(body []byte, cc *chains.Config, lim limits) (spec, []string) {
	var req struct {
		Type      json.RawMessage `json:"type"`
		FirstDate json.RawMessage `json:"firstDate"`
		LastDate  json.RawMessage `json:"lastDate"`
		StartDate json.RawMessage `json:"startDate"`
		EndDate   json.RawMessage `json:"endDate"`
		Options   json.RawMessage `json:"options"`
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(&req); err != nil || dec.More() || !bytes.HasPrefix(bytes.TrimSpace(body), []byte("{")) {
		return spec{}, []string{"Request body must be a JSON object"}
	}
	var errs []string
	fail := func(format string, args ...any) { errs = append(errs, fmt.Sprintf(format, args...)) }
	str := func(raw json.RawMessage) (string, bool) {
		var s string
		return s, json.Unmarshal(raw, &s) == nil
	}
	given := func(raw json.RawMessage) bool { return len(raw) > 0 && string(bytes.TrimSpace(raw)) != "null" }

	t, ok := str(req.Type)
	switch {
	case !given(req.Type) || !ok:
		fail("type must be one of the following values: %s", typeEVM)
	case t == typeEVM:
	case contains(primaryNetworkTypes, t):
		fail("type %s is not supported: moraine exports EVM transactions (type %s)", t, typeEVM)
	default:
		fail("type must be one of the following values: %s", typeEVM)
	}

	// firstDate/lastDate, or the deprecated startDate/endDate.
	date := func(name string, raw, alias json.RawMessage, aliasName string) (time.Time, bool) {
		if !given(raw) && given(alias) {
			raw, name = alias, aliasName
		} else if given(raw) && given(alias) && string(bytes.TrimSpace(raw)) != string(bytes.TrimSpace(alias)) {
			fail("%s and %s (its deprecated name) differ: give one of them", name, aliasName)
			return time.Time{}, false
		}
		if !given(raw) {
			fail("%s is required (YYYY-MM-DD, UTC)", name)
			return time.Time{}, false
		}
		s, ok := str(raw)
		d, err := time.Parse(time.DateOnly, s)
		if !ok || err != nil {
			fail("%s must be a date written YYYY-MM-DD", name)
			return time.Time{}, false
		}
		return d, true
	}
	first, okFirst := date("firstDate", req.FirstDate, req.StartDate, "startDate")
	last, okLast := date("lastDate", req.LastDate, req.EndDate, "endDate")
	if okFirst && okLast {
		switch days := int(last.Sub(first).Hours()/24) + 1; {
		case last.Before(first):
			fail("lastDate %s is before firstDate %s", last.Format(time.DateOnly), first.Format(time.DateOnly))
		case last.After(lim.today):
			fail("lastDate %s is in the future (today is %s, UTC)", last.Format(time.DateOnly), lim.today.Format(time.DateOnly))
		case days > lim.maxDays:
			fail("the range from firstDate to lastDate is %d days; at most %d are exported at once", days, lim.maxDays)
		}
	}

	var s spec
	var opts struct {
		Addresses     json.RawMessage `json:"addresses"`
		IncludeChains json.RawMessage `json:"includeChains"`
	}
	if !given(req.Options) || json.Unmarshal(req.Options, &opts) != nil || !bytes.HasPrefix(bytes.TrimSpace(req.Options), []byte("{")) {
		fail("options must be an object with addresses and includeChains")
		return s, errs
	}
	var addrs []string
	if err := json.Unmarshal(opts.Addresses, &addrs); err != nil || !given(opts.Addresses) {
		fail("options.addresses must be an array of addresses")
	} else {
		seen := map[string]bool{}
		for _, a := range addrs {
			if !addressRe.MatchString(a) {
				fail("options.addresses: %q is not an address (0x and 40 hex digits)", a)
				continue
			}
			a = "0x" + strings.ToLower(a[2:])
			if !seen[a] {
				seen[a] = true
				s.Addresses = append(s.Addresses, a)
			}
		}
		switch {
		case len(addrs) == 0:
			fail("options.addresses must contain at least 1 address")
		case len(s.Addresses) > lim.maxAddresses:
			fail("options.addresses must contain no more than %d addresses", lim.maxAddresses)
		}
	}
	var ids []string
	if err := json.Unmarshal(opts.IncludeChains, &ids); err != nil || !given(opts.IncludeChains) {
		fail("options.includeChains must be an array of chain ids")
	} else {
		seen := map[string]bool{}
		for _, id := range ids {
			ch, ok := cc.Find(id)
			if !ok {
				fail("options.includeChains: chain %q is not configured (GET /v1/chains lists them)", id)
				continue
			}
			if !seen[ch.EVMChainID] {
				seen[ch.EVMChainID] = true
				s.Chains = append(s.Chains, ch.EVMChainID)
			}
		}
		if len(ids) == 0 {
			fail("options.includeChains must contain at least 1 chain id")
		}
	}
	if errs != nil {
		return spec{}, errs
	}
	s.First, s.Last = first.Format(time.DateOnly), last.Format(time.DateOnly)
	return s, nil
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

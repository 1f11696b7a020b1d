package webhookapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/url"
	"regexp"
	"strings"

	"github.com/moraine-data/moraine/pkg/accountdb"
	"github.com/moraine-data/moraine/pkg/chains"
	"github.com/moraine-data/moraine/query/internal/server/apierr"
)

// Validation messages. "Invalid address format" is the hosted service's own
// (CONTRACT.md section 3.1); the others follow class-validator's wording.
const (
	msgNotJSON         = "Request body must be a JSON object"
	msgAddress         = "Invalid address format"
	msgEventSignature  = "Invalid event signature format"
	msgEventType       = "eventType must be one of the following values: address_activity"
	msgURL             = "url must be an absolute http or https URL"
	msgStatus          = "status must be one of the following values: active, inactive"
	maxURLLength       = 2048
	maxTextLength      = 1024
	maxEventSignatures = 100
	// MaxConfirmations bounds a webhook's confirmations (a moraine
	// extension): ingest finds reorgs only within its reorg window (256
	// blocks by default), so waiting longer protects against nothing.
	MaxConfirmations     = 256
	eventAddressActivity = "address_activity"
)

var (
	addressRe   = regexp.MustCompile(`^0x[0-9a-fA-F]{40}$`)
	signatureRe = regexp.MustCompile(`^0x[0-9a-fA-F]{64}$`)
)

// fields is a decoded JSON object. Unknown fields are tolerated (the hosted
// service accepts them; a docs tutorial sends includeLogs inside metadata).
type fields struct {
	m    map[string]json.RawMessage
	errs []string
	pre  string // prefix of field names in messages ("metadata.")
}

// decodeObject decodes body as a JSON object; a JSON null, array or scalar,
// or bytes that are not JSON, are a 400.
func decodeObject(body []byte) (*fields, error) {
	var m map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(&m); err != nil || m == nil || dec.More() {
		return nil, apierr.New(400, msgNotJSON)
	}
	return &fields{m: m}, nil
}

func (f *fields) fail(format string, args ...any) {
	f.errs = append(f.errs, fmt.Sprintf(format, args...))
}

// raw returns a field's JSON, treating null as absent (class-validator's
// @IsOptional does the same).
func (f *fields) raw(name string) (json.RawMessage, bool) {
	r, ok := f.m[name]
	if !ok || string(bytes.TrimSpace(r)) == "null" {
		return nil, false
	}
	return r, true
}

func (f *fields) str(name string, required bool) (string, bool) {
	r, ok := f.raw(name)
	if !ok {
		if required {
			f.fail("%s%s must be a string", f.pre, name)
		}
		return "", false
	}
	var s string
	if err := json.Unmarshal(r, &s); err != nil {
		f.fail("%s%s must be a string", f.pre, name)
		return "", false
	}
	return s, true
}

func (f *fields) boolean(name string) (bool, bool) {
	r, ok := f.raw(name)
	if !ok {
		return false, false
	}
	var b bool
	if err := json.Unmarshal(r, &b); err != nil {
		f.fail("%s%s must be a boolean value", f.pre, name)
		return false, false
	}
	return b, true
}

// confirmations reads the confirmations field (a moraine extension): an
// integer from 0 to MaxConfirmations.
func (f *fields) confirmations() (uint32, bool) {
	r, ok := f.raw("confirmations")
	if !ok {
		return 0, false
	}
	var n uint32
	if err := json.Unmarshal(r, &n); err != nil || n > MaxConfirmations {
		f.fail("%sconfirmations must be an integer from 0 to %d (blocks on top of a block before its activity is delivered)", f.pre, MaxConfirmations)
		return 0, false
	}
	return n, true
}

// strings reads an array of strings; elements that are not strings are
// reported as badElem.
func (f *fields) strings(name string, required bool, badElem string) ([]string, bool) {
	r, ok := f.raw(name)
	if !ok {
		if required {
			f.fail("%s%s must be an array", f.pre, name)
		}
		return nil, false
	}
	var items []json.RawMessage
	if err := json.Unmarshal(r, &items); err != nil {
		f.fail("%s%s must be an array", f.pre, name)
		return nil, false
	}
	out := make([]string, 0, len(items))
	bad := false
	for _, it := range items {
		var s string
		if err := json.Unmarshal(it, &s); err != nil {
			bad = true
			continue
		}
		out = append(out, s)
	}
	if bad {
		f.fail("%s", badElem)
		return nil, false
	}
	return out, true
}

func (f *fields) object(name string, required bool) (*fields, bool) {
	r, ok := f.raw(name)
	if !ok {
		if required {
			f.fail("%s%s must be an object", f.pre, name)
		}
		return nil, false
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(r, &m); err != nil {
		f.fail("%s%s must be an object", f.pre, name)
		return nil, false
	}
	return &fields{m: m, pre: f.pre + name + "."}, true
}

func (f *fields) text(name string) (string, bool) {
	s, ok := f.str(name, false)
	if ok && len(s) > maxTextLength {
		f.fail("%s must be shorter than or equal to %d characters", name, maxTextLength)
	}
	return s, ok
}

func (f *fields) url(required bool) (string, bool) {
	s, ok := f.str("url", required)
	if !ok {
		return "", false
	}
	if !validURL(s) {
		f.fail(msgURL)
		return "", false
	}
	return s, true
}

func validURL(s string) bool {
	if len(s) > maxURLLength || strings.ContainsAny(s, " \t\r\n") {
		return false
	}
	u, err := url.Parse(s)
	return err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != "" && u.Hostname() != ""
}

// addresses validates a list of addresses and drops case-insensitive
// duplicates, keeping the first spelling.
func (f *fields) addresses(list []string) []string {
	seen := make(map[string]bool, len(list))
	out := make([]string, 0, len(list))
	bad := false
	for _, a := range list {
		if !addressRe.MatchString(a) {
			bad = true
			continue
		}
		k := strings.ToLower(a)
		if !seen[k] {
			seen[k] = true
			out = append(out, a)
		}
	}
	if bad {
		f.fail(msgAddress)
	}
	return out
}

func (f *fields) err() error {
	if len(f.errs) == 0 {
		return nil
	}
	return apierr.Validation(f.errs...)
}

// createRequest is a validated EVMAddressActivityRequest.
type createRequest struct {
	URL                string
	Chain              chains.Chain
	Addresses          []string // as given, without case-insensitive duplicates
	EventSignatures    []string // lowercase
	Name, Description  string
	IncludeInternalTxs bool
	IncludeLogs        bool
	// Confirmations is the moraine extension (0 when absent).
	Confirmations uint32
	// FromBlock (a moraine extension) starts the webhook in the past: a
	// replay from that block (nil: none).
	FromBlock *uint64
}

// parseCreate validates a create body and reports every failed constraint.
func parseCreate(body []byte, cfg *chains.Config) (createRequest, error) {
	f, err := decodeObject(body)
	if err != nil {
		return createRequest{}, err
	}
	var req createRequest
	if et, ok := f.str("eventType", false); !ok || et != eventAddressActivity {
		if _, present := f.raw("eventType"); !present || ok {
			f.fail(msgEventType)
		}
	}
	req.URL, _ = f.url(true)
	chainID, hasChain := f.str("chainId", true)
	if hasChain {
		ch, ok := cfg.Find(chainID)
		if !ok || !ch.Webhooks {
			f.fail("chainId must be a chain with webhooks enabled (GET /v1/chains?feature=webhooks lists them); %q is not", chainID)
		} else {
			req.Chain = ch
		}
	}
	if md, ok := f.object("metadata", true); ok {
		if list, ok := md.strings("addresses", true, msgAddress); ok {
			req.Addresses = md.addresses(list)
			if len(list) == 0 {
				// A webhook that watches nothing never fires (class-validator's
				// @ArrayMinSize(1) wording).
				md.fail("metadata.addresses must contain at least 1 elements")
			}
		}
		if sigs, ok := md.strings("eventSignatures", false, msgEventSignature); ok {
			bad := false
			for _, s := range sigs {
				if !signatureRe.MatchString(s) {
					bad = true
					continue
				}
				req.EventSignatures = append(req.EventSignatures, strings.ToLower(s))
			}
			if bad {
				md.fail(msgEventSignature)
			}
			if len(sigs) > maxEventSignatures {
				md.fail("metadata.eventSignatures must contain no more than %d elements", maxEventSignatures)
			}
		}
		f.errs = append(f.errs, md.errs...)
	}
	req.Name, _ = f.text("name")
	req.Description, _ = f.text("description")
	req.IncludeInternalTxs, _ = f.boolean("includeInternalTxs")
	req.IncludeLogs, _ = f.boolean("includeLogs")
	req.Confirmations, _ = f.confirmations()
	req.FromBlock, _ = f.uint64Field("fromBlock", "the block the webhook starts at: its activity from there to the head is replayed")
	if req.IncludeInternalTxs && req.Chain.EVMChainID != "" && !req.Chain.Traces {
		f.fail("includeInternalTxs is only available on chains with traces, and chain %s has none", req.Chain.EVMChainID)
	}
	return req, f.err()
}

// updateRequest is a validated UpdateWebhookRequest: nil means unchanged.
type updateRequest struct {
	Name, Description, URL, Status  *string
	IncludeInternalTxs, IncludeLogs *bool
	Confirmations                   *uint32
}

func parseUpdate(body []byte) (updateRequest, error) {
	f, err := decodeObject(body)
	if err != nil {
		return updateRequest{}, err
	}
	var req updateRequest
	if s, ok := f.text("name"); ok {
		req.Name = &s
	}
	if s, ok := f.text("description"); ok {
		req.Description = &s
	}
	if s, ok := f.url(false); ok {
		req.URL = &s
	}
	if s, ok := f.str("status", false); ok {
		if s != accountdb.StatusActive && s != accountdb.StatusInactive {
			f.fail(msgStatus)
		} else {
			req.Status = &s
		}
	}
	if b, ok := f.boolean("includeInternalTxs"); ok {
		req.IncludeInternalTxs = &b
	}
	if b, ok := f.boolean("includeLogs"); ok {
		req.IncludeLogs = &b
	}
	if n, ok := f.confirmations(); ok {
		req.Confirmations = &n
	}
	return req, f.err()
}

// parseAddresses validates an AddressesChangeRequest.
func parseAddresses(body []byte) ([]string, error) {
	f, err := decodeObject(body)
	if err != nil {
		return nil, err
	}
	var out []string
	if list, ok := f.strings("addresses", true, msgAddress); ok {
		out = f.addresses(list)
	}
	return out, f.err()
}

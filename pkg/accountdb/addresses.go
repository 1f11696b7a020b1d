package accountdb

import (
	"context"
	"fmt"
	"math/big"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
)

// Address is one (webhook, address) row.
type Address struct {
	WebhookID string
	// Address is 0x + 40 lowercase hex: the key.
	Address string
	// Given is the address as the client wrote it (echoed by the API).
	Given   string
	Removed bool
	Version uint64
}

const (
	addressCols = `webhook_id, address, address_given, removed, version`
	iAddress    = `INSERT INTO webhook_addresses (` + addressCols + `)`
	// Filters on key columns may sit inside the FINAL subquery (every
	// version of a row has the same key); removed must be tested outside.
	qAddressStates = `SELECT ` + addressCols + ` FROM webhook_addresses FINAL WHERE webhook_id = ? AND address IN ?`
	qAddressRange  = `SELECT ` + addressCols + ` FROM (SELECT ` + addressCols + ` FROM webhook_addresses FINAL
WHERE webhook_id = ? AND address > ? AND address < ?) WHERE removed = 0 ORDER BY address LIMIT ?`
	qAddressCount = `SELECT count() FROM (SELECT removed FROM webhook_addresses FINAL WHERE webhook_id = ?) WHERE removed = 0`
	qAddressesOf  = `SELECT ` + addressCols + ` FROM (SELECT ` + addressCols + ` FROM webhook_addresses FINAL WHERE webhook_id IN ?)
WHERE removed = 0 ORDER BY webhook_id, address LIMIT ? BY webhook_id`
	// Rows newer than a version, reduced to the latest per key: any newer
	// row of a key is also in the range, so the argMax is the key's state.
	qAddressChanges = `SELECT webhook_id, address, argMax(address_given, version), argMax(removed, version), max(version)
FROM webhook_addresses WHERE version > ? GROUP BY webhook_id, address`
	qAllAddresses = `SELECT ` + addressCols + ` FROM webhook_addresses FINAL`
)

func scanAddress(r driver.Rows) (Address, error) {
	var a Address
	var removed uint8
	err := r.Scan(&a.WebhookID, &a.Address, &a.Given, &removed, &a.Version)
	a.Removed = removed == 1
	return a, err
}

// PutAddresses writes address rows in one batch (one block, applied
// atomically by ClickHouse).
func (db *DB) PutAddresses(ctx context.Context, rows []Address) error {
	batch := make([][]any, len(rows))
	for i, a := range rows {
		batch[i] = []any{a.WebhookID, a.Address, a.Given, b2u(a.Removed), a.Version}
	}
	return db.insert(ctx, "put_addresses", iAddress, batch)
}

// AddressStates reads the rows of webhookID for the given lowercase
// addresses, removed ones included; absent addresses are absent.
func (db *DB) AddressStates(ctx context.Context, webhookID string, addrs []string) (map[string]Address, error) {
	out := make(map[string]Address, len(addrs))
	for _, part := range chunks(addrs, inListMax) {
		set := make([]any, len(part))
		for i, a := range part {
			set[i] = a
		}
		err := db.query(ctx, "address_states", qAddressStates, func(r driver.Rows) error {
			a, err := scanAddress(r)
			out[a.Address] = a
			return err
		}, webhookID, clickhouse.GroupSet{Value: set})
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// CountAddresses counts webhookID's watched (not removed) addresses.
func (db *DB) CountAddresses(ctx context.Context, webhookID string) (int, error) {
	var n uint64
	err := db.query(ctx, "address_count", qAddressCount, func(r driver.Rows) error { return r.Scan(&n) }, webhookID)
	return int(n), err
}

var (
	addrSpace = new(big.Int).Lsh(big.NewInt(1), 160)
	// addrEnd sorts after every "0x" + 40 lowercase hex address.
	addrEnd = "0xg"
)

// AddressPage returns up to limit watched addresses of webhookID that sort
// after the lowercase address after ("" for the first page), in address
// order. total is the webhook's address count (CountAddresses), used to
// size the key range read: ClickHouse 18.16 cannot stop an ORDER BY ...
// LIMIT early, so an unbounded range would read every remaining row of a
// huge webhook for each page. Addresses are uniformly spread over the
// 160-bit space, so a range of 4*limit/total of it holds about 4*limit rows;
// it grows fourfold until the page is full or the range reaches the end.
func (db *DB) AddressPage(ctx context.Context, webhookID, after string, limit, total int) ([]Address, error) {
	lo := new(big.Int)
	if after != "" {
		if _, ok := lo.SetString(after[2:], 16); !ok || len(after) != 42 {
			return nil, fmt.Errorf("accountdb: bad address cursor %q", after)
		}
	} else {
		after = "0x" // sorts before every address
	}
	span := new(big.Int).Set(addrSpace)
	if total > 4*limit {
		span.Mul(span, big.NewInt(int64(4*limit)))
		span.Div(span, big.NewInt(int64(total)))
	}
	for {
		hi := new(big.Int).Add(lo, span)
		upper := addrEnd
		if hi.Cmp(addrSpace) < 0 {
			upper = fmt.Sprintf("0x%040x", hi)
		}
		out, err := collect(ctx, db.query, "address_page", qAddressRange, scanAddress, webhookID, after, upper, uint64(limit))
		if err != nil {
			return nil, err
		}
		if len(out) >= limit || upper == addrEnd {
			return out, nil
		}
		span.Lsh(span, 2)
	}
}

// AddressesOf returns up to perWebhook watched addresses (as given) of each
// webhook, in address order.
func (db *DB) AddressesOf(ctx context.Context, webhookIDs []string, perWebhook int) (map[string][]string, error) {
	out := make(map[string][]string, len(webhookIDs))
	if len(webhookIDs) == 0 {
		return out, nil
	}
	set := make([]any, len(webhookIDs))
	for i, id := range webhookIDs {
		set[i] = id
	}
	err := db.query(ctx, "addresses_of", qAddressesOf, func(r driver.Rows) error {
		a, err := scanAddress(r)
		out[a.WebhookID] = append(out[a.WebhookID], a.Given)
		return err
	}, clickhouse.GroupSet{Value: set}, uint64(perWebhook))
	return out, err
}

// AddressChangesSince calls fn with the latest state of every (webhook,
// address) key that has a row with version > since.
func (db *DB) AddressChangesSince(ctx context.Context, since uint64, fn func(Address) error) error {
	return db.stream(ctx, "address_changes", qAddressChanges, func(r driver.Rows) error {
		var a Address
		var removed uint8
		if err := r.Scan(&a.WebhookID, &a.Address, &a.Given, &removed, &a.Version); err != nil {
			return err
		}
		a.Removed = removed == 1
		return fn(a)
	}, since)
}

// AllAddresses calls fn with the latest state of every (webhook, address)
// key, removed ones included.
func (db *DB) AllAddresses(ctx context.Context, fn func(Address) error) error {
	return db.stream(ctx, "all_addresses", qAllAddresses, func(r driver.Rows) error {
		a, err := scanAddress(r)
		if err != nil {
			return err
		}
		return fn(a)
	})
}

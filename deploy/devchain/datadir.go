package devchain

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/ethereum/go-ethereum/common"
)

// stateFileName is the small JSON file the chain keeps next to its database in
// Config.DataDir. The database (go-ethereum's chaindata, under
// <DataDir>/moraine-devchain/) is the source of truth for blocks, state and
// nonces; this file only holds what the chain itself cannot tell: the settings
// the database was created with (checked on restart) and the reorg counter.
const stateFileName = "devchain.json"

// dataDirState is the content of stateFileName.
type dataDirState struct {
	ChainID  uint64 `json:"chainId"`
	Accounts int    `json:"accounts"`
	// Genesis is the hash of block 0, for information.
	Genesis common.Hash `json:"genesis"`
	// Branch is the reorg counter: it feeds the traffic generator so that a
	// reorg's new branch carries transactions never generated before, across
	// restarts too. It only grows.
	Branch uint64 `json:"branch"`
	// Contracts are the addresses of the core contracts, for information
	// (they are derived from the deployer and detected by their code).
	Contracts Contracts `json:"contracts"`
}

// readDataDirState reads the state file of dir; ok is false if there is none.
func readDataDirState(dir string) (st dataDirState, ok bool, err error) {
	data, err := os.ReadFile(filepath.Join(dir, stateFileName))
	if errors.Is(err, fs.ErrNotExist) {
		return st, false, nil
	}
	if err != nil {
		return st, false, fmt.Errorf("devchain: %w", err)
	}
	if err := json.Unmarshal(data, &st); err != nil {
		return st, false, fmt.Errorf("devchain: %s: %w", filepath.Join(dir, stateFileName), err)
	}
	return st, true, nil
}

// writeDataDirState replaces the state file of dir atomically (write + rename).
func writeDataDirState(dir string, st dataDirState) error {
	data, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return err
	}
	path := filepath.Join(dir, stateFileName)
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, append(data, '\n'), 0o600); err != nil {
		return fmt.Errorf("devchain: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("devchain: %w", err)
	}
	return nil
}

// checkDataDirState refuses to reuse a data dir created with another chain id
// or number of accounts: the genesis (its allocation) or the signatures of the
// stored transactions would not match.
func (c *Chain) checkDataDirState(st dataDirState) error {
	if st.ChainID != c.cfg.ChainID {
		return fmt.Errorf("devchain: data dir %s holds a chain with chain id %d, not %d: use that chain id or remove the directory",
			c.cfg.DataDir, st.ChainID, c.cfg.ChainID)
	}
	if st.Accounts != c.cfg.Accounts {
		return fmt.Errorf("devchain: data dir %s holds a chain with %d traffic accounts, not %d: use that number or remove the directory",
			c.cfg.DataDir, st.Accounts, c.cfg.Accounts)
	}
	return nil
}

// saveStateLocked writes the state file if the chain has a data dir. c.mu must
// be held (or the chain not yet shared).
func (c *Chain) saveStateLocked() error {
	if c.cfg.DataDir == "" {
		return nil
	}
	return writeDataDirState(c.cfg.DataDir, dataDirState{
		ChainID:   c.cfg.ChainID,
		Accounts:  c.cfg.Accounts,
		Genesis:   c.eth.BlockChain().Genesis().Hash(),
		Branch:    c.branch,
		Contracts: c.contracts,
	})
}

package replay

// Source is what a Server serves: a Recording loaded into memory, or a
// Corpus read from disk block by block.
type Source interface {
	// Len is the number of blocks; TxCount the number of transactions.
	Len() int
	TxCount() int
	// First and Last are the lowest and highest block numbers.
	First() uint64
	Last() uint64
	// ChainID is the EVM chain id the source knows of, 0 when it does not.
	ChainID() uint64

	// number is the i-th block's number (ascending order), without loading it.
	number(i int) uint64
	// index finds the position of a block by number or hash.
	index(n uint64) (int, bool)
	hashIndex(h Hash) (int, bool)
	// txLocation finds a transaction: its block's position and its own.
	txLocation(h Hash) (block, tx int, ok bool)
	// load returns the i-th block.
	load(i int) (*Block, error)
}

func (rec *Recording) number(i int) uint64 { return rec.blocks[i].Number }

func (rec *Recording) index(n uint64) (int, bool) {
	i, ok := rec.byNumber[n]
	return i, ok
}

func (rec *Recording) hashIndex(h Hash) (int, bool) {
	i, ok := rec.byHash[h]
	return i, ok
}

func (rec *Recording) txLocation(h Hash) (int, int, bool) {
	l, ok := rec.txs[h]
	return l.block, l.index, ok
}

func (rec *Recording) load(i int) (*Block, error) { return rec.blocks[i], nil }

package devchain

import (
	"crypto/ecdsa"
	"encoding/binary"
	"fmt"
	"math/big"
	"math/rand/v2"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/ethereum/go-ethereum/params"
)

// Contracts holds the addresses of the contracts the development chain deploys
// in its first block (from the deployer account, so the addresses are always
// the same). The traffic generator uses them every block.
type Contracts struct {
	USD     common.Address    `json:"usd"`     // ERC-20 "Moraine USD" (MUSD), 6 decimals
	WMOR    common.Address    `json:"wmor"`    // ERC-20 "Wrapped Moraine" (WMOR), 18 decimals
	NFT     common.Address    `json:"nft"`     // ERC-721 "Moraine Punks" (MPUNK)
	Items   common.Address    `json:"items"`   // ERC-1155 "Moraine Items" (MITEM)
	Relays  [4]common.Address `json:"relays"`  // value-forwarding relays (nested internal transactions)
	Factory common.Address    `json:"factory"` // creates tokens and relays from inside transactions
	// MetaNFT and MetaItems are the collections whose token URIs point at
	// the chain's metadata server (metadata.go): ERC-721 "Moraine Meta"
	// (MMETA) with one token per metadata outcome (MetaTokens), and ERC-1155
	// "Moraine Meta Items" (MMITEM) whose uri(id) is the {id} template.
	MetaNFT   common.Address `json:"metaNft"`
	MetaItems common.Address `json:"metaItems"`
}

// account is a funded genesis account.
type account struct {
	key  *ecdsa.PrivateKey
	addr common.Address
}

// deriveAccount returns the i-th well-known development account. Index 0 is the
// deployer, 1.. are the traffic accounts. The keys are public: never use them
// on a real network.
func deriveAccount(i int) account {
	key, err := crypto.ToECDSA(crypto.Keccak256([]byte(fmt.Sprintf("moraine devchain account %d", i))))
	if err != nil {
		panic(err)
	}
	return account{key: key, addr: crypto.PubkeyToAddress(key.PublicKey)}
}

// coreDeployments lists the deployer's transactions of the first block, in nonce order.
func coreDeployments() []struct {
	data []byte
	gas  uint64
} {
	type dep = struct {
		data []byte
		gas  uint64
	}
	relay := dep{relayContract.bin, 1_500_000}
	return []dep{
		{erc20Contract.deployData("Moraine USD", "MUSD", uint8(6)), 3_000_000},
		{erc20Contract.deployData("Wrapped Moraine", "WMOR", uint8(18)), 3_000_000},
		{erc721Contract.deployData("Moraine Punks", "MPUNK"), 4_000_000},
		{erc1155Contract.deployData("Moraine Items", "MITEM"), 5_000_000},
		relay, relay, relay, relay,
		{factoryContract.bin, 6_000_000},
	}
}

func contractsOf(deployer common.Address) Contracts {
	at := func(n uint64) common.Address { return crypto.CreateAddress(deployer, n) }
	return Contracts{
		USD: at(0), WMOR: at(1), NFT: at(2), Items: at(3),
		Relays:  [4]common.Address{at(4), at(5), at(6), at(7)},
		Factory: at(8),
		// Deployed after the core contracts (metaDeployments): at the
		// deployer's nonces 9 and 10 on a new chain and on one resumed
		// from a data dir made before they existed alike.
		MetaNFT: at(9), MetaItems: at(10),
	}
}

// metaDeployments lists the deployer's transactions that deploy the
// metadata collections and mint their special tokens, in nonce order; base
// is the metadata server's URL prefix.
func metaDeployments(base string) []struct {
	to   *common.Address
	data []byte
	gas  uint64
} {
	type dep = struct {
		to   *common.Address
		data []byte
		gas  uint64
	}
	deployer := deriveAccount(0).addr
	c := contractsOf(deployer)
	out := []dep{
		{nil, metaERC721.deployData("Moraine Meta", "MMETA", base), 4_000_000},
		{nil, metaERC1155.deployData("Moraine Meta Items", "MMITEM", base), 4_000_000},
	}
	for _, t := range MetaTokens() {
		if t.ERC1155 {
			out = append(out, dep{&c.MetaItems, metaERC1155.pack("setURI", new(big.Int).SetUint64(t.ID), t.mode, t.text), 300_000})
			out = append(out, dep{&c.MetaItems, metaERC1155.pack("mint", deployer, new(big.Int).SetUint64(t.ID), big.NewInt(10)), 200_000})
			continue
		}
		out = append(out, dep{&c.MetaNFT, metaERC721.pack("mintWithURI", deployer, new(big.Int).SetUint64(t.ID), t.mode, t.text), 400_000})
		if t.burn {
			out = append(out, dep{&c.MetaNFT, metaERC721.pack("burn", new(big.Int).SetUint64(t.ID)), 200_000})
		}
	}
	return out
}

// nonceSource gives the account nonces of the parent state.
type nonceSource interface {
	GetNonce(common.Address) uint64
}

// blockGen builds the transactions of one block. Everything it does is derived
// from the seed, the block number and the branch (reorg) counter, so the same
// seed gives the same transactions.
type blockGen struct {
	c       *Chain
	rng     *rand.Rand
	number  uint64 // number of the block being built
	branch  uint64
	baseFee *big.Int
	state   nonceSource
	nonces  map[common.Address]uint64
	txs     []*types.Transaction
	serial  uint64
}

func newBlockGen(c *Chain, number, branch uint64, baseFee *big.Int, st nonceSource) *blockGen {
	return &blockGen{
		c:       c,
		rng:     rand.New(rand.NewPCG(c.cfg.Seed, number^(branch<<48)^0x6d6f7261696e65)),
		number:  number,
		branch:  branch,
		baseFee: baseFee,
		state:   st,
		nonces:  map[common.Address]uint64{},
	}
}

// send signs a transaction from a to `to` (nil creates a contract) and appends it.
func (g *blockGen) send(from account, to *common.Address, value *big.Int, data []byte, gas uint64) {
	nonce, ok := g.nonces[from.addr]
	if !ok {
		nonce = g.state.GetNonce(from.addr)
	}
	g.nonces[from.addr] = nonce + 1
	if value == nil {
		value = new(big.Int)
	}
	tip := big.NewInt(params.GWei + g.rng.Int64N(2*params.GWei))
	var txdata types.TxData
	if g.rng.IntN(10) < 3 {
		txdata = &types.LegacyTx{
			Nonce: nonce, To: to, Value: value, Gas: gas, Data: data,
			GasPrice: new(big.Int).Add(g.baseFee, tip),
		}
	} else {
		txdata = &types.DynamicFeeTx{
			ChainID: g.c.chainCfg.ChainID, Nonce: nonce, To: to, Value: value, Gas: gas, Data: data,
			GasTipCap: tip,
			GasFeeCap: new(big.Int).Add(new(big.Int).Mul(g.baseFee, big.NewInt(2)), tip),
		}
	}
	tx, err := types.SignNewTx(from.key, g.c.signer, txdata)
	if err != nil {
		panic(err) // only on a programming error
	}
	g.txs = append(g.txs, tx)
}

// nextNonce is the nonce the next transaction of a will get.
func (g *blockGen) nextNonce(a account) uint64 {
	if n, ok := g.nonces[a.addr]; ok {
		return n
	}
	return g.state.GetNonce(a.addr)
}

// deployCore returns the deployments of the core contracts from the deployer.
func (g *blockGen) deployCore() {
	for _, d := range coreDeployments() {
		g.send(g.c.deployer, nil, nil, d.data, d.gas)
	}
}

// deployMeta deploys the metadata collections and mints their special
// tokens, from the deployer; it reports false (and sends nothing) when the
// deployer's next nonce would not give them their fixed addresses.
func (g *blockGen) deployMeta() bool {
	if crypto.CreateAddress(g.c.deployer.addr, g.nextNonce(g.c.deployer)) != g.c.contracts.MetaNFT {
		return false
	}
	for _, d := range metaDeployments(g.c.metadataBase()) {
		g.send(g.c.deployer, d.to, nil, d.data, d.gas)
	}
	return true
}

// pointMeta points the metadata collections at this process's metadata
// server (the address may differ from the one stored in a resumed chain).
func (g *blockGen) pointMeta() {
	base := g.c.metadataBase()
	g.send(g.c.deployer, &g.c.contracts.MetaNFT, nil, metaERC721.pack("setBaseURI", base), 300_000)
	g.send(g.c.deployer, &g.c.contracts.MetaItems, nil, metaERC1155.pack("setBaseURI", base), 300_000)
}

// fill adds traffic until the block holds n transactions. Kinds are taken in a
// seeded random order so that every kind shows up within a few blocks.
func (g *blockGen) fill(n int, nativeOnly bool) {
	kinds := g.kinds()
	if nativeOnly {
		kinds = kinds[:1]
	}
	order := g.rng.Perm(len(kinds))
	for i := 0; len(g.txs) < n; i++ {
		kinds[order[i%len(order)]].fn()
	}
	g.txs = g.txs[:n] // dropping the tail keeps each sender's nonces contiguous
}

// capGas drops the transactions past the point where their gas limits add up
// to more than limit, so that every generated transaction fits in the block.
// It reports whether it dropped any.
func (g *blockGen) capGas(limit uint64) bool {
	var sum uint64
	for i, tx := range g.txs {
		sum += tx.Gas()
		if sum > limit {
			g.txs = g.txs[:i]
			return true
		}
	}
	return false
}

type kind struct {
	name string
	fn   func()
}

func (g *blockGen) kinds() []kind {
	kinds := []kind{
		{"native", g.native},
		{"erc20-transfer", g.erc20Transfer},
		{"erc20-approve-pull", g.erc20ApprovePull},
		{"erc721-mint-transfer", g.erc721MintTransfer},
		{"erc1155-single", g.erc1155Single},
		{"erc1155-batch", g.erc1155Batch},
		{"create", g.create},
		{"relay-nested", g.relayNested},
		{"factory", g.factory},
		{"probe-caught-revert", g.probe},
		{"revert-transfer", g.revertTransfer},
		{"revert-deep", g.revertDeep},
	}
	if g.c.cfg.noMeta {
		return kinds
	}
	return append(kinds, kind{"erc721-meta", g.erc721Meta}, kind{"erc1155-meta", g.erc1155Meta})
}

// two returns two different traffic accounts.
func (g *blockGen) two() (account, account) {
	accs := g.c.accounts
	i := g.rng.IntN(len(accs))
	j := g.rng.IntN(len(accs) - 1)
	if j >= i {
		j++
	}
	return accs[i], accs[j]
}

func (g *blockGen) uniqueID() *big.Int {
	g.serial++
	return new(big.Int).SetUint64(g.branch<<48 | g.number<<16 | g.serial&0xffff)
}

// ether returns a random amount between lo and hi milli-ether.
func (g *blockGen) milliEther(lo, hi int64) *big.Int {
	return new(big.Int).Mul(big.NewInt(lo+g.rng.Int64N(hi-lo+1)), big.NewInt(params.Ether/1000))
}

func units(n int64, decimals uint) *big.Int {
	return new(big.Int).Mul(big.NewInt(n), new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(decimals)), nil))
}

func (g *blockGen) token() (common.Address, uint) {
	if g.rng.IntN(2) == 0 {
		return g.c.contracts.USD, 6
	}
	return g.c.contracts.WMOR, 18
}

func (g *blockGen) native() {
	a, b := g.two()
	to := b.addr
	if g.rng.IntN(5) == 0 { // a brand-new address
		var fresh common.Address
		binary.BigEndian.PutUint64(fresh[:8], g.rng.Uint64())
		binary.BigEndian.PutUint64(fresh[8:16], g.rng.Uint64())
		binary.BigEndian.PutUint32(fresh[16:], g.rng.Uint32())
		to = fresh
	}
	g.send(a, &to, g.milliEther(1, 5000), nil, params.TxGas)
}

func (g *blockGen) erc20Transfer() {
	a, b := g.two()
	tok, dec := g.token()
	amount := units(1+g.rng.Int64N(10_000), dec)
	g.send(a, &tok, nil, erc20Contract.pack("mint", a.addr, new(big.Int).Mul(amount, big.NewInt(2))), 150_000)
	g.send(a, &tok, nil, erc20Contract.pack("transfer", b.addr, amount), 150_000)
}

func (g *blockGen) erc20ApprovePull() {
	a, b := g.two()
	tok, dec := g.token()
	amount := units(1+g.rng.Int64N(1_000), dec)
	relay := g.c.contracts.Relays[g.rng.IntN(len(g.c.contracts.Relays))]
	allowance := amount
	if g.rng.IntN(3) == 0 {
		allowance = new(big.Int).Sub(new(big.Int).Lsh(big.NewInt(1), 256), big.NewInt(1)) // unlimited
	}
	g.send(a, &tok, nil, erc20Contract.pack("mint", a.addr, amount), 150_000)
	g.send(a, &tok, nil, erc20Contract.pack("approve", relay, allowance), 100_000)
	g.send(a, &relay, nil, relayContract.pack("pull", tok, b.addr, amount), 200_000)
}

func (g *blockGen) erc721MintTransfer() {
	a, b := g.two()
	nft := g.c.contracts.NFT
	id := g.uniqueID()
	g.send(a, &nft, nil, erc721Contract.pack("mint", a.addr, id), 200_000)
	if g.rng.IntN(2) == 0 {
		g.send(a, &nft, nil, erc721Contract.pack("transferFrom", a.addr, b.addr, id), 200_000)
	} else {
		g.send(a, &nft, nil, erc721Contract.packSig("safeTransferFrom(address,address,uint256)", a.addr, b.addr, id), 200_000)
	}
}

func (g *blockGen) itemID() *big.Int { return big.NewInt(1 + g.rng.Int64N(20)) }

func (g *blockGen) erc1155Single() {
	a, b := g.two()
	items := g.c.contracts.Items
	id, amount := g.itemID(), big.NewInt(10+g.rng.Int64N(1000))
	g.send(a, &items, nil, erc1155Contract.pack("mint", a.addr, id, amount), 200_000)
	g.send(a, &items, nil, erc1155Contract.pack("safeTransferFrom", a.addr, b.addr, id, new(big.Int).Div(amount, big.NewInt(2)), []byte{}), 200_000)
}

func (g *blockGen) erc1155Batch() {
	a, b := g.two()
	items := g.c.contracts.Items
	n := 2 + g.rng.IntN(3)
	ids, amounts, halves := make([]*big.Int, n), make([]*big.Int, n), make([]*big.Int, n)
	for i := range n {
		ids[i] = big.NewInt(int64(1 + i*7 + g.rng.IntN(7)))
		amounts[i] = big.NewInt(10 + g.rng.Int64N(1000))
		halves[i] = new(big.Int).Div(amounts[i], big.NewInt(2))
	}
	g.send(a, &items, nil, erc1155Contract.pack("mintBatch", a.addr, ids, amounts), 400_000)
	g.send(a, &items, nil, erc1155Contract.pack("safeBatchTransferFrom", a.addr, b.addr, ids, halves, []byte{}), 400_000)
}

// erc721Meta mints a token of the metadata collection (a good document)
// and gives it to another account.
func (g *blockGen) erc721Meta() {
	a, b := g.two()
	nft := g.c.contracts.MetaNFT
	id := new(big.Int).Add(g.uniqueID(), big.NewInt(MetaTrafficIDBase))
	g.send(a, &nft, nil, metaERC721.pack("mint", a.addr, id), 200_000)
	g.send(a, &nft, nil, metaERC721.pack("transferFrom", a.addr, b.addr, id), 200_000)
}

// erc1155Meta mints one of the metadata items' template ids and passes
// some on.
func (g *blockGen) erc1155Meta() {
	a, b := g.two()
	items := g.c.contracts.MetaItems
	id := big.NewInt(1 + g.rng.Int64N(MetaItemIDs))
	g.send(a, &items, nil, metaERC1155.pack("mint", a.addr, id, big.NewInt(10)), 200_000)
	g.send(a, &items, nil, metaERC1155.pack("safeTransferFrom", a.addr, b.addr, id, big.NewInt(3), []byte{}), 200_000)
}

// create deploys a contract from a traffic account and uses it in the same block.
func (g *blockGen) create() {
	a, b := g.two()
	addr := crypto.CreateAddress(a.addr, g.nextNonce(a))
	tag := fmt.Sprintf("%d", g.number)
	if g.branch > 0 {
		tag = fmt.Sprintf("%d-%d", g.number, g.branch)
	}
	switch g.rng.IntN(3) {
	case 0:
		dec := []uint8{6, 8, 18}[g.rng.IntN(3)]
		g.send(a, nil, nil, erc20Contract.deployData("Moraine Token "+tag, "MT"+tag, dec), 3_000_000)
		g.send(a, &addr, nil, erc20Contract.pack("mint", a.addr, units(1_000_000, uint(dec))), 150_000)
		g.send(a, &addr, nil, erc20Contract.pack("transfer", b.addr, units(1_000, uint(dec))), 150_000)
	case 1:
		g.send(a, nil, nil, erc721Contract.deployData("Moraine Collection "+tag, "MC"+tag), 4_000_000)
		g.send(a, &addr, nil, erc721Contract.pack("mint", b.addr, big.NewInt(1)), 200_000)
	default:
		g.send(a, nil, nil, relayContract.bin, 1_500_000)
		g.send(a, &addr, g.milliEther(1, 100), nil, 100_000)
	}
}

// relayNested sends value through 3 or 4 relays to an account: the callTracer
// shows calls with value 3 or 4 levels below the transaction's own frame.
func (g *blockGen) relayNested() {
	a, b := g.two()
	perm := g.rng.Perm(len(g.c.contracts.Relays))
	k := 3 + g.rng.IntN(2)
	first := g.c.contracts.Relays[perm[0]]
	hops := make([]common.Address, 0, k)
	for _, p := range perm[1:k] {
		hops = append(hops, g.c.contracts.Relays[p])
	}
	hops = append(hops, b.addr)
	g.send(a, &first, g.milliEther(10, 1000), relayContract.pack("relay", hops), 500_000)
}

func (g *blockGen) factory() {
	a, _ := g.two()
	f := g.c.contracts.Factory
	if g.rng.IntN(2) == 0 {
		tag := fmt.Sprintf("%d%c", g.number, 'a'+rune(g.serial%26))
		g.serial++
		g.send(a, &f, nil, factoryContract.pack("createToken", "Factory Token "+tag, "FT"+tag, uint8(18), units(1_000_000, 18)), 3_000_000)
	} else {
		var salt [32]byte
		copy(salt[:], g.uniqueID().FillBytes(make([]byte, 32)))
		g.send(a, &f, g.milliEther(1, 50), factoryContract.pack("createRelay", salt), 1_500_000)
	}
}

// probe makes a failing inner call (value sent to a non-payable function) that
// the relay catches: a successful transaction with a failed internal frame.
func (g *blockGen) probe() {
	a, b := g.two()
	relay := g.c.contracts.Relays[g.rng.IntN(len(g.c.contracts.Relays))]
	inner := erc721Contract.pack("transferFrom", a.addr, b.addr, big.NewInt(0))
	g.send(a, &relay, g.milliEther(1, 10), relayContract.pack("probe", g.c.contracts.NFT, inner), 300_000)
}

// revertTransfer transfers more tokens than anybody has: status 0.
func (g *blockGen) revertTransfer() {
	a, b := g.two()
	tok, _ := g.token()
	huge := new(big.Int).Lsh(big.NewInt(1), 255)
	g.send(a, &tok, nil, erc20Contract.pack("transfer", b.addr, huge), 150_000)
}

// revertDeep relays value to a contract that cannot receive it: the innermost
// call fails and the failure propagates up, the transaction has status 0.
func (g *blockGen) revertDeep() {
	a, _ := g.two()
	r := g.c.contracts.Relays
	hops := []common.Address{r[1], r[2], g.c.contracts.NFT}
	g.send(a, &r[0], g.milliEther(1, 100), relayContract.pack("relay", hops), 500_000)
}

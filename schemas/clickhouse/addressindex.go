package clickhouse

// The per-address lists (the list byte of address_lists.list_key, migration
// 8; the list column of migration 6's address_index): the processor's sink
// writes them and the query service reads them.
const (
	// ListTransactions: the transactions an address took part in, one row
	// per (address, transaction), with the Role bits saying how.
	ListTransactions uint8 = 1
	// ListERC20, ListERC721, ListERC1155: token transfers with the address
	// as sender or recipient.
	ListERC20   uint8 = 2
	ListERC721  uint8 = 3
	ListERC1155 uint8 = 4
	// ListTokenTransfers: every transfer of the token the address is.
	ListTokenTransfers uint8 = 5
	// ListInternal: internal transactions with the address as sender or
	// recipient.
	ListInternal uint8 = 6
	// ListDeployments: contracts the address created (as the transaction's
	// sender or as the creating contract).
	ListDeployments uint8 = 7
	// ListCreation: the creation of the contract the address is.
	ListCreation uint8 = 8
)

// Roles of an address in a transaction (address_lists.roles bits on
// ListTransactions rows).
const (
	RoleSender uint8 = 1 << iota
	// RoleRecipient: the transaction's to, or the contract it created.
	RoleRecipient
	// RoleTransferParty: sender or recipient of one of its token transfers.
	RoleTransferParty
	// RoleToken: the token of one of its transfers.
	RoleToken
	// RoleInternalParty: sender or recipient of one of its listed internal
	// transactions.
	RoleInternalParty
)

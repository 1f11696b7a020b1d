package main

// historyOperations are the EVM transaction, address-history and contract
// routes (their own list, merged into operations at start).
var historyOperations = map[string][]string{
	"/v1/transactions":                                                    {"get"},
	"/v1/address/{address}/chains":                                        {"get"},
	"/v1/chains/allTransactions":                                          {"get"},
	"/v1/chains/address/{address}":                                        {"get"},
	"/v1/chains/{chainId}/transactions":                                   {"get"},
	"/v1/chains/{chainId}/transactions/{txHash}":                          {"get"},
	"/v1/chains/{chainId}/addresses/{address}":                            {"get"},
	"/v1/chains/{chainId}/addresses/{address}/transactions":               {"get"},
	"/v1/chains/{chainId}/addresses/{address}/transactions:listNative":    {"get"},
	"/v1/chains/{chainId}/addresses/{address}/transactions:listErc20":     {"get"},
	"/v1/chains/{chainId}/addresses/{address}/transactions:listErc721":    {"get"},
	"/v1/chains/{chainId}/addresses/{address}/transactions:listErc1155":   {"get"},
	"/v1/chains/{chainId}/addresses/{address}/transactions:listInternals": {"get"},
	"/v1/chains/{chainId}/tokens/{address}/transfers":                     {"get"},
	"/v1/chains/{chainId}/contracts/{address}/transactions:getDeployment": {"get"},
	"/v1/chains/{chainId}/contracts/{address}/deployments":                {"get"},
}

func init() {
	for p, ms := range historyOperations {
		operations[p] = ms
	}
}

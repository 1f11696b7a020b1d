package app

import (
	"encoding/json"
	"net/http"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/moraine-data/moraine/pkg/testenv"
)

// TestOpenAPIListsEveryRoute: /api-json names every operation the whole
// service serves, webhook routes and moraine's extensions included, and
// nothing else (issue 16: the webhooks API and the deliveries route were
// missing). HEAD is implied by GET.
func TestOpenAPIListsEveryRoute(t *testing.T) {
	chCfg, _ := testenv.ClickHouse(t)
	a, url := startApp(t, func(c *Config) { c.ClickHouse = chCfg })
	resp, err := http.Get(url + "/api-json")
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	var doc struct {
		// The payload moraine POSTs to webhook URLs (issue 27: missing).
		Webhooks map[string]map[string]struct {
			RequestBody struct {
				Content map[string]struct {
					Schema struct {
						Ref string `json:"$ref"`
					} `json:"schema"`
				} `json:"content"`
			} `json:"requestBody"`
		} `json:"webhooks"`
		Components struct {
			Schemas map[string]any `json:"schemas"`
		} `json:"components"`
		Paths map[string]map[string]struct {
			OperationID string           `json:"operationId"`
			Extension   bool             `json:"x-moraine-extension"`
			Security    []map[string]any `json:"security"`
			RequestBody struct {
				Content map[string]struct {
					Schema struct {
						Ref string `json:"$ref"`
					} `json:"schema"`
				} `json:"content"`
			} `json:"requestBody"`
		} `json:"paths"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&doc))
	param := regexp.MustCompile(`\{([a-zA-Z]+)\}`)
	customAfterParam := regexp.MustCompile(`(/:[A-Za-z]+):[A-Za-z]+$`)
	var documented, webhookOps, extensions []string
	for p, ms := range doc.Paths {
		for m, op := range ms {
			documented = append(documented, strings.ToUpper(m)+" "+param.ReplaceAllString(p, ":$1"))
			if op.Extension {
				extensions = append(extensions, op.OperationID)
			}
			if strings.HasPrefix(p, "/v1/webhooks") {
				// Every webhook operation needs a key.
				require.Equal(t, []map[string]any{{"apiKey": []any{}}}, op.Security, "%s %s", m, p)
				if !op.Extension {
					webhookOps = append(webhookOps, op.OperationID)
				}
			}
		}
	}
	// The route table, as the router serves it: a custom method after a
	// parameter ("/tokens/{tokenId}:reindex") is one gin route ending in the
	// parameter, whose suffix the server checks (server.Route), so the
	// table's templates are compared, and their number with gin's routes.
	// Custom methods of one parameter's path share its gin route
	// ("/operations/{operationId}" and "/operations/{operationId}:download").
	var served []string
	ginPaths := map[string]bool{}
	for _, r := range a.routes {
		served = append(served, r.Method+" "+r.Template())
		ginPaths[r.Method+" "+customAfterParam.ReplaceAllString(r.Template(), "$1")] = true
	}
	gin := 0
	for _, r := range a.router.Routes() {
		if r.Method != http.MethodHead && r.Path != "/api-json" {
			gin++
		}
	}
	require.Equal(t, len(ginPaths), gin, "every route of the table is a route of the router")
	served = append(served, "GET /api-json")
	documented = append(documented, "GET /api-json")
	sort.Strings(documented)
	sort.Strings(served)
	require.Equal(t, served, documented)
	sort.Strings(webhookOps)
	require.Equal(t, []string{"addAddressesToWebhook", "createWebhook", "deactivateWebhook", "generateOrRotateSharedSecret",
		"getAddressesFromWebhook", "getSharedSecret", "getWebhook", "listWebhooks", "removeAddressesFromWebhook", "updateWebhook"}, webhookOps)
	sort.Strings(extensions)
	require.Equal(t, []string{"cancelWebhookReplay", "getOperationFile", "getWebhookReplay", "listWebhookDeliveries", "listWebhookReplays", "replayWebhook"}, extensions)
	// Exports take EVM requests only (issue 27), and the primary network's
	// request is not in the document.
	export := doc.Paths["/v1/operations/transactions:export"]["post"]
	require.Equal(t, "postTransactionExportJob", export.OperationID)
	require.Equal(t, "#/components/schemas/CreateEvmTransactionExportRequest",
		export.RequestBody.Content["application/json"].Schema.Ref)
	require.NotContains(t, doc.Components.Schemas, "CreatePrimaryNetworkTransactionExportRequest")
	// Usage, health and operations are served (issue 27).
	for _, op := range []string{"getApiUsageMetrics", "getApiLogs", "data-health-check", "live-check", "postTransactionExportJob", "getOperationResult"} {
		found := false
		for _, ms := range doc.Paths {
			for _, o := range ms {
				found = found || o.OperationID == op
			}
		}
		require.True(t, found, op)
	}
	payload := doc.Webhooks["address_activity"]["post"].RequestBody.Content["application/json"].Schema.Ref
	require.Equal(t, "#/components/schemas/WebhookAddressActivityResponse", payload)
	require.Contains(t, doc.Components.Schemas, "WebhookAddressActivityResponse")
	// moraine's extension fields of hosted schemas are documented and marked.
	for _, schema := range []string{"EVMAddressActivityRequest", "UpdateWebhookRequest", "EVMAddressActivityResponse"} {
		props, _ := doc.Components.Schemas[schema].(map[string]any)["properties"].(map[string]any)
		c, _ := props["confirmations"].(map[string]any)
		require.Equal(t, true, c["x-moraine-extension"], "%s.confirmations", schema)
		require.Equal(t, "integer", c["type"], "%s.confirmations", schema)
	}
}

// TestOpenAPIBalanceExtensions: blockNumber on listErc721Balances and
// listCollectibleBalances is documented, as moraine's; the hosted routes
// that have it keep the hosted parameter.
func TestOpenAPIBalanceExtensions(t *testing.T) {
	chCfg, _ := testenv.ClickHouse(t)
	_, url := startApp(t, func(c *Config) { c.ClickHouse = chCfg })
	resp, err := http.Get(url + "/api-json")
	require.NoError(t, err)
	defer resp.Body.Close()
	var doc struct {
		Paths map[string]map[string]struct {
			Parameters []struct {
				Name      string `json:"name"`
				Extension bool   `json:"x-moraine-extension"`
			} `json:"parameters"`
		} `json:"paths"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&doc))
	for route, ext := range map[string]bool{"listErc721": true, "listCollectibles": true, "listErc20": false, "listErc1155": false, "getNative": false} {
		op := doc.Paths["/v1/chains/{chainId}/addresses/{address}/balances:"+route]["get"]
		found := false
		for _, p := range op.Parameters {
			if p.Name == "blockNumber" {
				found = true
				require.Equal(t, ext, p.Extension, route)
			}
		}
		require.True(t, found, "%s documents blockNumber", route)
	}
}

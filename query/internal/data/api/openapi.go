package api

import (
	_ "embed"
	"net/http"

	"github.com/gin-gonic/gin"
)

//go:generate go run ./openapigen -spec ../../../../shared/spec/glacier_openapi_2026-01.json.zst -out openapi.json

// openAPI is the served subset of the hosted spec (see openapigen).
//
//go:embed openapi.json
var openAPI []byte

// serveOpenAPI: GET /api-json, the NestJS Swagger JSON path.
func serveOpenAPI(c *gin.Context) {
	c.Data(http.StatusOK, "application/json; charset=utf-8", openAPI)
}

package nftfetch

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"

	"github.com/moraine-data/moraine/pkg/nftmeta"
)

// Document is what the API renders of a metadata document (the
// ERC-721/ERC-1155 metadata JSON schemas and OpenSea's common extensions).
type Document struct {
	Name, Symbol, Description, ImageURI, AnimationURI, ExternalURL, Background string
	// Attributes and Properties are the compact JSON text of the document's
	// "attributes" and "properties" ("" when absent).
	Attributes, Properties string
	Decimals               *int
}

// parseDocument reads a metadata document: INDEXED with its fields, or the
// status that says why it is not one.
func parseDocument(body []byte) (Document, string, string) {
	body = bytes.TrimPrefix(body, []byte("\xef\xbb\xbf")) // a UTF-8 byte order mark
	if !json.Valid(body) {
		return Document{}, nftmeta.StatusInvalidMetadataJSON, "the document is not JSON"
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(body, &obj); err != nil {
		return Document{}, nftmeta.StatusInvalidMetadata, "the document is JSON but not an object"
	}
	var d Document
	found := 0
	str := func(dst *string, keys ...string) {
		for _, k := range keys {
			var s string
			if raw, ok := obj[k]; ok && json.Unmarshal(raw, &s) == nil {
				*dst = s
				found++
				return
			}
		}
	}
	text := func(dst *string, key string) {
		raw, ok := obj[key]
		if !ok || bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
			return
		}
		var b bytes.Buffer
		if json.Compact(&b, raw) == nil {
			*dst = b.String()
			found++
		}
	}
	str(&d.Name, "name")
	str(&d.Description, "description")
	str(&d.ImageURI, "image", "image_url")
	str(&d.AnimationURI, "animation_url")
	str(&d.ExternalURL, "external_url")
	str(&d.Background, "background_color", "background")
	text(&d.Attributes, "attributes")
	text(&d.Properties, "properties")
	// symbol and decimals alone do not make a document metadata.
	if raw, ok := obj["symbol"]; ok {
		_ = json.Unmarshal(raw, &d.Symbol)
	}
	if raw, ok := obj["decimals"]; ok {
		var f float64
		if json.Unmarshal(raw, &f) == nil && f >= 0 && f <= 255 && f == math.Trunc(f) {
			n := int(f)
			d.Decimals = &n
		}
	}
	if found == 0 {
		return Document{}, nftmeta.StatusInvalidMetadata, fmt.Sprintf("the JSON object has none of the metadata fields (%d keys)", len(obj))
	}
	return d, nftmeta.StatusIndexed, ""
}

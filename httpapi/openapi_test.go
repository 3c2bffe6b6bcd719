package httpapi

import (
	"encoding/json"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// TestOpenAPIMatchesRoutes ensures the OpenAPI document describes exactly
// the registered routes (same paths, same methods), that public routes
// are marked as needing no key, and that every $ref resolves.
func TestOpenAPIMatchesRoutes(t *testing.T) {
	var doc struct {
		OpenAPI string                                `json:"openapi"`
		Paths   map[string]map[string]json.RawMessage `json:"paths"`
	}
	if err := json.Unmarshal(openAPIDocument, &doc); err != nil {
		t.Fatalf("openapi.json is not valid JSON: %v", err)
	}
	if doc.OpenAPI != "3.1.0" {
		t.Errorf("openapi = %q, want 3.1.0", doc.OpenAPI)
	}
	param := regexp.MustCompile(`:([a-z_]+)`)
	registered := map[string]access{}
	for _, r := range New(Config{}).Routes() {
		registered[strings.ToLower(r.Method)+" "+param.ReplaceAllString(r.Path, "{$1}")] = r.Access
	}
	documented := map[string]json.RawMessage{}
	for path, ops := range doc.Paths {
		for method, op := range ops {
			if method == "parameters" {
				continue
			}
			documented[method+" "+path] = op
		}
	}
	for _, k := range sortedKeys(registered) {
		op, ok := documented[k]
		if !ok {
			t.Errorf("route %s is not in openapi.json", k)
			continue
		}
		var o struct {
			OperationID string             `json:"operationId"`
			Security    *[]json.RawMessage `json:"security"`
			Responses   map[string]any     `json:"responses"`
		}
		if err := json.Unmarshal(op, &o); err != nil {
			t.Fatal(err)
		}
		if o.OperationID == "" || len(o.Responses) == 0 {
			t.Errorf("%s lacks an operationId or responses", k)
		}
		isPublic := o.Security != nil && len(*o.Security) == 0
		if isPublic != (registered[k] == public) {
			t.Errorf("%s: documented as public=%v, registered as public=%v", k, isPublic, registered[k] == public)
		}
	}
	for _, k := range sortedKeys(documented) {
		if _, ok := registered[k]; !ok {
			t.Errorf("openapi.json documents %s, which is not a route", k)
		}
	}

	var all any
	json.Unmarshal(openAPIDocument, &all)
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			if ref, ok := v["$ref"].(string); ok && !resolves(all, ref) {
				t.Errorf("unresolved $ref %s", ref)
			}
			for _, x := range v {
				walk(x)
			}
		case []any:
			for _, x := range v {
				walk(x)
			}
		}
	}
	walk(all)
}

func resolves(doc any, ref string) bool {
	cur := doc
	for _, part := range strings.Split(strings.TrimPrefix(ref, "#/"), "/") {
		m, ok := cur.(map[string]any)
		if !ok {
			return false
		}
		if cur, ok = m[part]; !ok {
			return false
		}
	}
	return true
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// TestOpenAPIErrorCodes ensures the Error schema's code enum lists every
// error code the server can answer with.
func TestOpenAPIErrorCodes(t *testing.T) {
	var doc struct {
		Components struct {
			Schemas struct {
				Error struct {
					Properties struct {
						Error struct {
							Properties struct {
								Code struct {
									Enum []string `json:"enum"`
								} `json:"code"`
							} `json:"properties"`
						} `json:"error"`
					} `json:"properties"`
				} `json:"Error"`
			} `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal(openAPIDocument, &doc); err != nil {
		t.Fatal(err)
	}
	enum := map[string]bool{}
	for _, c := range doc.Components.Schemas.Error.Properties.Error.Properties.Code.Enum {
		enum[c] = true
	}
	for _, code := range []string{"bad_request", "unauthorized", "insufficient_scope", "plan_limit_exceeded",
		"plan_feature_unavailable", "not_found", "method_not_allowed", "conflict", "payload_too_large",
		"unsupported_media_type", "validation_failed", "verification_failed", "rate_limited", "internal",
		"dns_unavailable", "not_ready"} {
		if !enum[code] {
			t.Errorf("the Error schema's code enum lacks %s", code)
		}
	}
}

package app

import (
	"net/http"
	"strings"

	"github.com/okengine/oke"
)

// Gate is the demo's identity rule, a public contract:
//
//	Authorization: Bearer user:<id>   → principal "user:<id>"
//	X-API-Key: <id>                   → principal "apikey:<id>"
//	neither                           → principal "anon"
//	any other Authorization           → 401 Unauthorized
//
// The tenant is the X-Tenant header, "default" when absent. Ids and tenants
// are 1–128 printable ASCII characters without spaces; anything else is 401
// (credentials) or 400 (tenant). Authorization wins over X-API-Key.
//
// The demo trusts these headers as they are: a real app would check a
// signed token or look the API key up.
//
// The directive below tells oke extract the tenant's rule, for the X-Tenant
// parameter of openapi.json (extract reads which headers a gate reads, not
// what it accepts).
//
//oke:header X-Tenant minLength:"1" maxLength:"128" pattern:"^[!-~]+$"
func Gate(r *http.Request, _ string) (oke.Identity, error) {
	id := oke.Identity{Tenant: "default", Principal: "anon"}
	if t := r.Header.Get("X-Tenant"); t != "" {
		if !validName(t) {
			return oke.Identity{}, oke.Fail(http.StatusBadRequest, "InvalidTenant",
				"X-Tenant must be 1–128 printable ASCII characters without spaces.")
		}
		id.Tenant = t
	}
	if auth := r.Header.Get("Authorization"); auth != "" {
		scheme, cred, _ := strings.Cut(auth, " ")
		user, ok := strings.CutPrefix(strings.TrimSpace(cred), "user:")
		if !strings.EqualFold(scheme, "Bearer") || !ok || !validName(user) {
			return oke.Identity{}, oke.Unauthorized(`Authorization must be "Bearer user:ID" (or send "X-API-Key: ID", or neither to call as anon).`)
		}
		id.Principal = "user:" + user
		return id, nil
	}
	if key := r.Header.Get("X-API-Key"); key != "" {
		if !validName(key) {
			return oke.Identity{}, oke.Unauthorized("X-API-Key must be 1–128 printable ASCII characters without spaces.")
		}
		id.Principal = "apikey:" + key
	}
	return id, nil
}

// validName reports whether s is 1–128 printable ASCII characters without
// spaces.
func validName(s string) bool {
	if len(s) == 0 || len(s) > 128 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] <= ' ' || s[i] > '~' {
			return false
		}
	}
	return true
}

// Package httpx holds the HTTP plumbing the oke packages share: the JSON
// error envelope every error answer is, JSON bodies, and the 404/405 of a
// ServeMux's catch-all. It knows no oke rule.
package httpx

import (
	"bytes"
	"encoding/json"
	"fmt"
	"mime"
	"net/http"
	"strconv"
	"strings"
)

// Marshal encodes v as JSON without HTML escaping, with a trailing newline
// (what every oke body looks like).
func Marshal(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

type envelope struct {
	Error struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// Envelope is the JSON error envelope {"error":{"code":…,"message":…}}. A
// message longer than MaxMessage is cut.
func Envelope(code, message string) []byte {
	var e envelope
	e.Error.Code, e.Error.Message = code, capMessage(message)
	b, err := Marshal(e)
	if err != nil { // cannot happen: two strings
		return []byte(`{"error":{"code":"InternalError","message":"encode error"}}` + "\n")
	}
	return b
}

// WriteEnvelope writes an error answer: status, the envelope, and
// Retry-After when retryAfter (seconds) is positive.
func WriteEnvelope(w http.ResponseWriter, status int, code, message string, retryAfter int) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	if retryAfter > 0 {
		h.Set("Retry-After", strconv.Itoa(retryAfter))
	}
	w.WriteHeader(status)
	w.Write(Envelope(code, message))
}

// WriteJSON writes v as a JSON body with status.
func WriteJSON(w http.ResponseWriter, status int, v any) {
	b, err := Marshal(v)
	if err != nil {
		WriteEnvelope(w, http.StatusInternalServerError, "InternalError", "The server failed to complete this request.", 0)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(b)
}

// NotFound answers a request that matched only mux's catch-all pattern:
// 405 MethodNotAllowed (with Allow) when the path exists with another
// method, else 404 NotFound, as envelopes.
func NotFound(mux *http.ServeMux, w http.ResponseWriter, r *http.Request) {
	var allow []string
	for _, m := range []string{http.MethodGet, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete, "QUERY"} {
		if m == r.Method {
			continue
		}
		r2 := r.Clone(r.Context())
		r2.Method = m
		if _, p := mux.Handler(r2); p != "/" && p != "" {
			allow = append(allow, m)
		}
	}
	if len(allow) > 0 {
		w.Header().Set("Allow", strings.Join(allow, ", "))
		WriteEnvelope(w, http.StatusMethodNotAllowed, "MethodNotAllowed",
			fmt.Sprintf("%s is not allowed here; use %s.", Cut(r.Method), strings.Join(allow, " or ")), 0)
		return
	}
	WriteEnvelope(w, http.StatusNotFound, "NotFound", fmt.Sprintf("No route matches %s %s.", Cut(r.Method), Cut(r.URL.Path)), 0)
}

// IsJSON reports whether the media type ct is JSON (application/json or
// any +json type).
func IsJSON(ct string) bool {
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil {
		return false
	}
	return mt == "application/json" || strings.HasSuffix(mt, "+json")
}

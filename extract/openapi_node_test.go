package extract_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/okengine/oke/internal/npmtools"
)

// The OpenAPI documents are valid OpenAPI 3.1 for a second independent
// validator, besides kin-openapi (TestOpenAPIValidates):
// @seriousme/openapi-schema-validator, which checks a document against the
// OpenAPI Initiative's JSON Schema of 3.1 with ajv and resolves every $ref.
// It runs on node, from the tools scripts/npmtools installs (pinned by
// scripts/npm/package-lock.json); without them the test skips, or fails
// under CI.
func TestOpenAPIValidatesWithNode(t *testing.T) {
	node, validate := npmtools.Bin(t, "validate-api")
	for _, name := range openAPIDocs {
		t.Run(name, func(t *testing.T) {
			out, err := exec.Command(node, validate, name).CombinedOutput()
			if err != nil {
				t.Fatalf("@seriousme/openapi-schema-validator finds %s invalid (%v):\n%s", name, err, out)
			}
		})
	}
}

// The validator does fail on a broken document, so the test above can.
func TestOpenAPINodeValidatorRefusesABrokenDocument(t *testing.T) {
	node, validate := npmtools.Bin(t, "validate-api")
	name := filepath.Join(t.TempDir(), "broken.json")
	doc := `{"openapi":"3.1.0","info":{"title":"x","version":"1"},"paths":{"/a":{"get":{"responses":{"200":{"$ref":"#/components/responses/Nope"}}}}}}`
	if err := os.WriteFile(name, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(node, validate, name).CombinedOutput(); err == nil {
		t.Fatalf("the validator accepts a document with a dangling $ref:\n%s", out)
	}
}

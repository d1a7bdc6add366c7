package gateway_test

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fairq/fairq/gateway"
	"github.com/fairq/fairq/internal/testenv"
)

// The code generator the document is held to, and the module its client
// code imports, at the versions `make deps` installs.
const (
	oapiCodegenVersion = "v2.8.2"
	oapiCodegenInstall = "run `make deps`, or go install github.com/oapi-codegen/oapi-codegen/v2/cmd/oapi-codegen@" + oapiCodegenVersion
)

// generatedGoMod and generatedGoSum make the module the generated code is
// built in: oapi-codegen's runtime, pinned with its checksums so that the
// build needs neither the checksum database nor, once the module cache has
// them, the network.
const (
	generatedGoMod = `module example.com/fairqapi

go 1.26

require github.com/oapi-codegen/runtime v1.8.0

require (
	github.com/apapsch/go-jsonmerge/v2 v2.0.0 // indirect
	github.com/google/uuid v1.6.0 // indirect
)
`
	generatedGoSum = `github.com/RaveNoX/go-jsoncommentstrip v1.0.0/go.mod h1:78ihd09MekBnJnxpICcwzCMzGrKSKYe4AqU6PDYYpjk=
github.com/apapsch/go-jsonmerge/v2 v2.0.0 h1:axGnT1gRIfimI7gJifB699GoE/oq+F2MU7Dml6nw9rQ=
github.com/apapsch/go-jsonmerge/v2 v2.0.0/go.mod h1:lvDnEdqiQrp0O42VQGgmlKpxL1AP2+08jFMw88y4klk=
github.com/bmatcuk/doublestar v1.1.1/go.mod h1:UD6OnuiIn0yFxxA2le/rnRU1G4RaI4UvFv1sNto9p6w=
github.com/davecgh/go-spew v1.1.0/go.mod h1:J7Y8YcW2NihsgmVo/mv3lAwl/skON4iLHjSsI+c5H38=
github.com/google/uuid v1.6.0 h1:NIvaJDMOsjHA8n1jAhLSgzrAzy1Hgr+hNrb57e+94F0=
github.com/google/uuid v1.6.0/go.mod h1:TIyPZe4MgqvfeYDBFedMoGGpEw/LqOeaOT+nhxU+yHo=
github.com/juju/gnuflag v0.0.0-20171113085948-2ce1bb71843d/go.mod h1:2PavIy+JPciBPrBUjwbNvtwB6RQlve+hkpll6QSNmOE=
github.com/oapi-codegen/runtime v1.8.0 h1:RJzEgQSJQADEPaG1cYuSCKYai/cCVRE2xnkrqhJs/3c=
github.com/oapi-codegen/runtime v1.8.0/go.mod h1:GwV7hC2hviaMzj+ITfHVRESK5J2W/GefVwIND/bMGvU=
github.com/pmezard/go-difflib v1.0.0/go.mod h1:iKH77koFhYxTK1pcRnkKkqfTogsbg7gZNVY4sRDYZ/4=
github.com/spkg/bom v0.0.0-20160624110644-59b7046e48ad/go.mod h1:qLr4V1qq6nMqFKkMo8ZTx3f+BZEkzsRUY10Xsm2mwU0=
github.com/stretchr/objx v0.1.0/go.mod h1:HFkY916IF+rwdDfMAkV7OtwuqBVzrE8GR6GFx+wExME=
github.com/stretchr/testify v1.3.0/go.mod h1:M5WIy9Dh21IEIfnGCwXGc5bZfKNJtfHm1UVUgZn+9EI=
`
)

// TestOpenAPIGenerates: oapi-codegen makes types and a client of the
// document, and that code compiles: a user can generate a client of the
// API. The control: the body schema as a list of types, which the
// generator cannot map to a Go type, is refused.
func TestOpenAPIGenerates(t *testing.T) {
	t.Parallel()
	bin := oapiCodegen(t)
	t.Run("document", func(t *testing.T) {
		t.Parallel()
		out, err := generate(t, bin, gateway.OpenAPI())
		if err != nil {
			t.Fatalf("oapi-codegen: %v\n%s", err, out)
		}
		if out, err := buildGenerated(t, out); err != nil {
			t.Fatalf("the generated code does not build: %v\n%s", err, out)
		}
	})
	t.Run("control: a type list is refused", func(t *testing.T) {
		t.Parallel()
		doc := withBodySchema(t, map[string]any{"type": []string{"string", "object", "array", "number", "boolean"}})
		out, err := generate(t, bin, doc)
		if err == nil {
			t.Fatalf("oapi-codegen generated code for a body with a list of types; want it refused")
		}
		if !strings.Contains(string(out), "body") {
			t.Errorf("oapi-codegen failed without naming body: %s", out)
		}
	})
	t.Run("control: code that does not compile is caught", func(t *testing.T) {
		t.Parallel()
		out, err := generate(t, bin, gateway.OpenAPI())
		if err != nil {
			t.Fatalf("oapi-codegen: %v\n%s", err, out)
		}
		broken := append(out, "\nvar _ Message = 1\n"...)
		if out, err := buildGenerated(t, broken); err == nil {
			t.Errorf("a type error in the generated code built: %s", out)
		}
	})
}

// oapiCodegen returns the oapi-codegen command at the pinned version.
func oapiCodegen(t *testing.T) string {
	t.Helper()
	bin := testenv.Tool(t, "oapi-codegen", oapiCodegenInstall)
	out, err := exec.Command(bin, "-version").CombinedOutput()
	if err != nil {
		t.Fatalf("oapi-codegen -version: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), oapiCodegenVersion) {
		t.Fatalf("oapi-codegen at %s is %s; the test pins %s: %s", bin, bytes.TrimSpace(out), oapiCodegenVersion, oapiCodegenInstall)
	}
	return bin
}

// generate runs oapi-codegen on doc and returns the Go code, or its
// error output.
func generate(t *testing.T, bin string, doc []byte) ([]byte, error) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "openapi.json")
	if err := os.WriteFile(path, doc, 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(t.Context(), bin, "-generate", "types,client", "-package", "fairqapi", path)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stderr.Bytes(), err
	}
	return stdout.Bytes(), nil
}

// buildGenerated compiles code as the one file of a module of its own.
func buildGenerated(t *testing.T, code []byte) ([]byte, error) {
	t.Helper()
	dir := t.TempDir()
	for name, content := range map[string]string{"go.mod": generatedGoMod, "go.sum": generatedGoSum, "fairqapi.go": string(code)} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.CommandContext(t.Context(), "go", "build", "./...")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=readonly", "GOWORK=off")
	return cmd.CombinedOutput()
}

// withBodySchema returns the document with the body of Message set to
// schema.
func withBodySchema(t *testing.T, schema map[string]any) []byte {
	t.Helper()
	var doc map[string]any
	if err := json.Unmarshal(gateway.OpenAPI(), &doc); err != nil {
		t.Fatal(err)
	}
	props := doc["components"].(map[string]any)["schemas"].(map[string]any)["Message"].(map[string]any)["properties"].(map[string]any)
	props["body"] = schema
	out, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

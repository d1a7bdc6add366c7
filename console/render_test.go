package console

import (
	"net/http/httptest"
	"strings"
	"testing"
)

// TestRenderEscapesTheError: the login page's error is text, never markup,
// and the page without one carries neither the error nor its mark.
func TestRenderEscapesTheError(t *testing.T) {
	var c Console
	w := httptest.NewRecorder()
	c.render(w, 401, pageData{Error: `<script>alert("x")</script> & more`})
	body := w.Body.String()
	if !strings.Contains(body, `<p class="problem" id="login-error" role="alert">&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt; &amp; more</p>`) {
		t.Errorf("error not escaped into its paragraph:\n%s", body)
	}
	if strings.Contains(body, "<script>") || strings.Contains(body, "console.js") {
		t.Errorf("login page runs a script:\n%s", body)
	}

	w = httptest.NewRecorder()
	c.render(w, 200, pageData{})
	if body := w.Body.String(); strings.Contains(body, errorMark) || strings.Contains(body, "login-error") || !strings.Contains(body, `id="login"`) {
		t.Errorf("login page without an error:\n%s", body)
	}

	w = httptest.NewRecorder()
	c.render(w, 200, pageData{LoggedIn: true})
	if body := w.Body.String(); !strings.Contains(body, `<script src="/console/console.js" defer></script>`) || strings.Contains(body, `id="login"`) {
		t.Errorf("console page:\n%s", body)
	}
}

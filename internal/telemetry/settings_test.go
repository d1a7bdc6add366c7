package telemetry

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func envOf(kv map[string]string) func(string) string {
	return func(k string) string { return kv[k] }
}

func TestReadSettings(t *testing.T) {
	tests := []struct {
		name        string
		env         map[string]string
		on          bool
		endpoint    string
		sampler     string
		service     string
		headers     map[string]string
		timeout     time.Duration
		gzip        bool
		errContains []string
	}{
		{name: "nothing set", env: nil, on: false},
		{name: "service name alone", env: map[string]string{"OTEL_SERVICE_NAME": "x"}, on: false},
		{name: "exporter none with an endpoint", env: map[string]string{"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"}, on: false},
		{name: "sdk disabled", env: map[string]string{"OTEL_SDK_DISABLED": "true", "OTEL_TRACES_EXPORTER": "otlp"}, on: false},
		{name: "endpoint alone", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318/"},
			on: true, endpoint: "http://collector:4318/v1/traces", sampler: "ParentBased{root:AlwaysOnSampler,", service: "fairq-gateway"},
		{name: "traces endpoint is the whole URL", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://a:4318", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "https://b/custom"},
			on: true, endpoint: "https://b/custom", service: "fairq-gateway"},
		{name: "otlp without endpoint", env: map[string]string{"OTEL_TRACES_EXPORTER": "otlp"},
			on: true, endpoint: "http://localhost:4318/v1/traces", service: "fairq-gateway"},
		{name: "everything", env: map[string]string{
			"OTEL_TRACES_EXPORTER": "OTLP", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
			"OTEL_SERVICE_NAME": "queue-front", "OTEL_TRACES_SAMPLER": "parentbased_traceidratio", "OTEL_TRACES_SAMPLER_ARG": "0.01",
			"OTEL_EXPORTER_OTLP_HEADERS": "api-key=s%3Dcret, x=y", "OTEL_EXPORTER_OTLP_TIMEOUT": "2500", "OTEL_EXPORTER_OTLP_COMPRESSION": "gzip",
		}, on: true, endpoint: "http://c:4318/v1/traces", sampler: "ParentBased{root:TraceIDRatioBased{0.01}", service: "queue-front",
			headers: map[string]string{"api-key": "s=cret", "x": "y"}, timeout: 2500 * time.Millisecond, gzip: true},
		{name: "service name from the resource attributes", env: map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_RESOURCE_ATTRIBUTES": "service.name=from-attrs,deployment.environment=prod"},
			on: true, service: "from-attrs"},
		{name: "errors, all at once", env: map[string]string{
			"OTEL_TRACES_EXPORTER": "zipkin", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc", "OTEL_TRACES_SAMPLER": "sometimes",
			"OTEL_EXPORTER_OTLP_ENDPOINT": "collector:4318", "OTEL_RESOURCE_ATTRIBUTES": "novalue", "OTEL_EXPORTER_OTLP_TIMEOUT": "soon",
			"OTEL_EXPORTER_OTLP_COMPRESSION": "zstd",
		}, errContains: []string{"OTEL_TRACES_EXPORTER=\"zipkin\"", "OTEL_EXPORTER_OTLP_PROTOCOL=\"grpc\" is not supported; use http/protobuf", "OTEL_TRACES_SAMPLER=\"sometimes\"",
			"OTEL_EXPORTER_OTLP_ENDPOINT=\"collector:4318\"", "OTEL_RESOURCE_ATTRIBUTES", "OTEL_EXPORTER_OTLP_TIMEOUT", "OTEL_EXPORTER_OTLP_COMPRESSION"}},
		{name: "ratio out of range", env: map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_TRACES_SAMPLER": "traceidratio", "OTEL_TRACES_SAMPLER_ARG": "2"},
			errContains: []string{"OTEL_TRACES_SAMPLER_ARG=\"2\""}},
		{name: "traces protocol wins", env: map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/protobuf"},
			on: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := readSettings(envOf(tt.env), "fairq-gateway")
			if len(tt.errContains) > 0 {
				if err == nil {
					t.Fatalf("no error, want one naming %v", tt.errContains)
				}
				for _, want := range tt.errContains {
					if !strings.Contains(err.Error(), want) {
						t.Errorf("error %q does not name %s", err, want)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if s.on != tt.on {
				t.Fatalf("on = %v, want %v", s.on, tt.on)
			}
			if !tt.on {
				return
			}
			if tt.endpoint != "" && s.endpoint != tt.endpoint {
				t.Errorf("endpoint %q, want %q", s.endpoint, tt.endpoint)
			}
			if tt.sampler != "" && !strings.HasPrefix(s.samplerName, tt.sampler) {
				t.Errorf("sampler %q, want %q…", s.samplerName, tt.sampler)
			}
			if tt.service != "" && s.serviceName != tt.service {
				t.Errorf("service %q, want %q", s.serviceName, tt.service)
			}
			if diff := cmp.Diff(tt.headers, s.headers); diff != "" {
				t.Errorf("headers (-want +got):\n%s", diff)
			}
			if s.timeout != tt.timeout || s.gzip != tt.gzip {
				t.Errorf("timeout %v gzip %v, want %v %v", s.timeout, s.gzip, tt.timeout, tt.gzip)
			}
		})
	}
}

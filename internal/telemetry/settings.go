package telemetry

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// The OTEL_* variables fairq reads (the OpenTelemetry SDK environment
// specification). The SDK's batch span processor also reads OTEL_BSP_*
// from the process's environment.
const (
	envSDKDisabled        = "OTEL_SDK_DISABLED"
	envTracesExporter     = "OTEL_TRACES_EXPORTER"
	envEndpoint           = "OTEL_EXPORTER_OTLP_ENDPOINT"
	envTracesEndpoint     = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
	envProtocol           = "OTEL_EXPORTER_OTLP_PROTOCOL"
	envTracesProtocol     = "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"
	envHeaders            = "OTEL_EXPORTER_OTLP_HEADERS"
	envTracesHeaders      = "OTEL_EXPORTER_OTLP_TRACES_HEADERS"
	envTimeout            = "OTEL_EXPORTER_OTLP_TIMEOUT"
	envTracesTimeout      = "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT"
	envCompression        = "OTEL_EXPORTER_OTLP_COMPRESSION"
	envTracesCompression  = "OTEL_EXPORTER_OTLP_TRACES_COMPRESSION"
	envCertificate        = "OTEL_EXPORTER_OTLP_CERTIFICATE"
	envTracesCertificate  = "OTEL_EXPORTER_OTLP_TRACES_CERTIFICATE"
	envClientCert         = "OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE"
	envTracesClientCert   = "OTEL_EXPORTER_OTLP_TRACES_CLIENT_CERTIFICATE"
	envClientKey          = "OTEL_EXPORTER_OTLP_CLIENT_KEY"
	envTracesClientKey    = "OTEL_EXPORTER_OTLP_TRACES_CLIENT_KEY"
	envServiceName        = "OTEL_SERVICE_NAME"
	envResourceAttributes = "OTEL_RESOURCE_ATTRIBUTES"
	envSampler            = "OTEL_TRACES_SAMPLER"
	envSamplerArg         = "OTEL_TRACES_SAMPLER_ARG"
)

// defaultEndpoint is where OTLP/HTTP traces go when
// OTEL_TRACES_EXPORTER=otlp names no endpoint: a collector beside the
// process, as the specification has it.
const defaultEndpoint = "http://localhost:4318"

// tracesPath is appended to OTEL_EXPORTER_OTLP_ENDPOINT, not to the
// traces-only endpoint, which is the whole URL.
const tracesPath = "/v1/traces"

// settings is what the environment asks of tracing.
type settings struct {
	// on is false when no exporter is asked for: the tracer provider is
	// then the no-op one.
	on          bool
	endpoint    string // the whole URL traces are POSTed to
	headers     map[string]string
	timeout     time.Duration // zero: the exporter's default (10 s)
	gzip        bool
	tls         *tls.Config // nil: the system's roots, no client certificate
	sampler     sdktrace.Sampler
	head        *HeadSampler // the sampler's decision made before a span starts
	samplerName string       // for the start-up log line
	serviceName string
	attributes  []attribute.KeyValue // OTEL_RESOURCE_ATTRIBUTES, in order
}

// readSettings reads the OTEL_* variables through getenv. Tracing is on
// when OTEL_TRACES_EXPORTER is "otlp", or when it is unset and an OTLP
// endpoint is; it is off when it is unset with no endpoint, when it is
// "none", and when OTEL_SDK_DISABLED is true. Values fairq cannot honour
// (another exporter or protocol, a malformed sampler, endpoint or
// attribute) are errors, each naming its variable, all reported at once:
// a trace pipeline that silently sends nothing is worse than a process
// that says why it will not start.
func readSettings(getenv func(string) string, defaultService string) (settings, error) {
	r := &envReader{getenv: getenv}
	var s settings
	if strings.EqualFold(r.get(envSDKDisabled), "true") {
		return s, nil
	}
	s.readExporter(r)
	s.readTransport(r)
	var err error
	if s.sampler, s.head, s.samplerName, err = readSampler(getenv); err != nil {
		r.errs = append(r.errs, err)
	}
	s.readResource(r, defaultService)
	if err := errors.Join(r.errs...); err != nil {
		return settings{}, err
	}
	return s, nil
}

// envReader reads the variables and gathers what is wrong with them.
type envReader struct {
	getenv func(string) string
	errs   []error
}

func (r *envReader) get(name string) string { return strings.TrimSpace(r.getenv(name)) }

// either reads the traces-only variable, or the general one when it is
// unset, and says which it read.
func (r *envReader) either(specific, general string) (value, name string) {
	if v := r.get(specific); v != "" {
		return v, specific
	}
	return r.get(general), general
}

func (r *envReader) bad(format string, args ...any) {
	r.errs = append(r.errs, fmt.Errorf(format, args...))
}

// readExporter reads whether spans are exported, and where.
func (s *settings) readExporter(r *envReader) {
	tracesEndpoint, endpoint := r.get(envTracesEndpoint), r.get(envEndpoint)
	switch exp := strings.ToLower(r.get(envTracesExporter)); exp {
	case "":
		s.on = tracesEndpoint != "" || endpoint != ""
	case "none":
	case "otlp":
		s.on = true
	default:
		r.bad("%s=%q: fairq exports traces with otlp (or none)", envTracesExporter, exp)
	}
	if p, name := r.either(envTracesProtocol, envProtocol); p != "" && p != "http/protobuf" {
		r.bad("%s=%q is not supported; use http/protobuf (collectors serve it on port 4318)", name, p)
	}
	switch {
	case tracesEndpoint != "":
		s.endpoint = tracesEndpoint
		checkURL(tracesEndpoint, envTracesEndpoint, r.bad)
	case endpoint != "":
		s.endpoint = strings.TrimRight(endpoint, "/") + tracesPath
		checkURL(endpoint, envEndpoint, r.bad)
	default:
		s.endpoint = defaultEndpoint + tracesPath
	}
}

// readTransport reads how requests are made: headers, timeout,
// compression and TLS files.
func (s *settings) readTransport(r *envReader) {
	if v, name := r.either(envTracesHeaders, envHeaders); v != "" {
		h, err := parsePairs(v)
		if err != nil {
			r.bad("%s: %w", name, err)
		}
		s.headers = make(map[string]string, len(h))
		for _, kv := range h {
			s.headers[string(kv.Key)] = kv.Value.AsString()
		}
	}
	if v, name := r.either(envTracesTimeout, envTimeout); v != "" {
		ms, err := strconv.ParseUint(v, 10, 32)
		if err != nil || ms == 0 {
			r.bad("%s=%q: want a positive number of milliseconds", name, v)
		}
		s.timeout = time.Duration(ms) * time.Millisecond
	}
	switch v, name := r.either(envTracesCompression, envCompression); v {
	case "", "none":
	case "gzip":
		s.gzip = true
	default:
		r.bad("%s=%q: want gzip or none", name, v)
	}
	ca, caName := r.either(envTracesCertificate, envCertificate)
	cert, certName := r.either(envTracesClientCert, envClientCert)
	key, keyName := r.either(envTracesClientKey, envClientKey)
	if ca != "" || cert != "" || key != "" {
		var err error
		if s.tls, err = tlsConfig(ca, cert, key); err != nil {
			r.bad("%s, %s, %s: %w", caName, certName, keyName, err)
		}
	}
}

// readResource reads the service's name and the resource's attributes.
func (s *settings) readResource(r *envReader, defaultService string) {
	if v := r.get(envResourceAttributes); v != "" {
		var err error
		if s.attributes, err = parsePairs(v); err != nil {
			r.bad("%s: %w", envResourceAttributes, err)
		}
	}
	s.serviceName = r.get(envServiceName)
	if s.serviceName == "" {
		for _, kv := range s.attributes {
			if kv.Key == "service.name" {
				s.serviceName = kv.Value.AsString()
			}
		}
	}
	if s.serviceName == "" {
		s.serviceName = defaultService
	}
}

// tlsConfig trusts the CA certificates in the PEM file ca, when set, in
// place of the system's, and presents the client certificate and key
// files, when set.
func tlsConfig(ca, cert, key string) (*tls.Config, error) {
	c := &tls.Config{MinVersion: tls.VersionTLS12}
	if ca != "" {
		pem, err := os.ReadFile(ca)
		if err != nil {
			return nil, err
		}
		c.RootCAs = x509.NewCertPool()
		if !c.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("%s holds no PEM certificate", ca)
		}
	}
	if cert != "" || key != "" {
		pair, err := tls.LoadX509KeyPair(cert, key)
		if err != nil {
			return nil, fmt.Errorf("client certificate: %w", err)
		}
		c.Certificates = []tls.Certificate{pair}
	}
	return c, nil
}

// transport is the exporter's: the default one (proxies from the
// environment) with the TLS settings.
func (s settings) transport() (http.RoundTripper, error) {
	tr, ok := http.DefaultTransport.(*http.Transport)
	if !ok {
		return nil, errors.New("otlp exporter: http.DefaultTransport is not an *http.Transport")
	}
	tr = tr.Clone()
	if s.tls != nil {
		tr.TLSClientConfig = s.tls
	}
	return tr, nil
}

// checkURL reports an endpoint that is not an absolute http or https URL.
func checkURL(v, name string, bad func(string, ...any)) {
	u, err := url.Parse(v)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		bad("%s=%q: want an absolute http or https URL", name, v)
	}
}

// readSampler reads OTEL_TRACES_SAMPLER and its argument; the default is
// parentbased_always_on, as the specification has it.
func readSampler(getenv func(string) string) (sdktrace.Sampler, *HeadSampler, string, error) {
	name := strings.ToLower(strings.TrimSpace(getenv(envSampler)))
	if name == "" {
		name = "parentbased_always_on"
	}
	ratio := 1.0
	if arg := strings.TrimSpace(getenv(envSamplerArg)); arg != "" && strings.HasSuffix(name, "traceidratio") {
		r, err := strconv.ParseFloat(arg, 64)
		if err != nil || r < 0 || r > 1 {
			return nil, nil, "", fmt.Errorf("%s=%q: want a ratio between 0 and 1", envSamplerArg, arg)
		}
		ratio = r
	}
	var s sdktrace.Sampler
	switch name {
	case "always_on":
		s = sdktrace.AlwaysSample()
	case "always_off":
		s = sdktrace.NeverSample()
	case "traceidratio":
		s = sdktrace.TraceIDRatioBased(ratio)
	case "parentbased_always_on":
		s = sdktrace.ParentBased(sdktrace.AlwaysSample())
	case "parentbased_always_off":
		s = sdktrace.ParentBased(sdktrace.NeverSample())
	case "parentbased_traceidratio":
		s = sdktrace.ParentBased(sdktrace.TraceIDRatioBased(ratio))
	default:
		return nil, nil, "", fmt.Errorf("%s=%q: want always_on, always_off, traceidratio or their parentbased_ forms", envSampler, name)
	}
	return s, newHeadSampler(name, ratio), s.Description(), nil
}

// parsePairs reads the key=value,key=value lists of
// OTEL_RESOURCE_ATTRIBUTES and OTEL_EXPORTER_OTLP_HEADERS: values are
// percent-decoded, spaces around keys and values trimmed.
func parsePairs(v string) ([]attribute.KeyValue, error) {
	var out []attribute.KeyValue
	for _, item := range strings.Split(v, ",") {
		if strings.TrimSpace(item) == "" {
			continue
		}
		k, val, ok := strings.Cut(item, "=")
		k = strings.TrimSpace(k)
		if !ok || k == "" {
			return nil, fmt.Errorf("%q is not key=value", item)
		}
		dec, err := url.PathUnescape(strings.TrimSpace(val))
		if err != nil {
			return nil, fmt.Errorf("value of %s: %w", k, err)
		}
		out = append(out, attribute.String(k, dec))
	}
	return out, nil
}

package config

import (
	"fmt"
	"math"
	"reflect"
	"strconv"
	"strings"
	"time"
)

// EnvPrefix starts every environment variable Parse reads.
const EnvPrefix = "FAIRQ_"

// envKey is one scalar key that the environment can override.
type envKey struct {
	path  string // "worker.push_url"
	name  string // "FAIRQ_WORKER_PUSH_URL"
	index []int  // field index in Config
}

// envKeys lists the scalar keys of Config in declaration order, built from
// the yaml tags: the variable names cannot be split back into paths, since
// keys such as push_url hold "_" themselves. Lists of strings (redis.addrs)
// are comma-separated; other lists (tenants) are skipped.
func envKeys() []envKey {
	var keys []envKey
	var walk func(t reflect.Type, path string, index []int)
	walk = func(t reflect.Type, path string, index []int) {
		for _, f := range keysOf(t) {
			p := joinPath(path, f.name)
			idx := append(append([]int(nil), index...), f.index...)
			switch {
			case f.typ.Kind() == reflect.Slice && f.typ.Elem().Kind() != reflect.String:
			case f.typ.Kind() == reflect.Struct && f.typ != durationType:
				walk(f.typ, p, idx)
			default:
				name := EnvPrefix + strings.ToUpper(strings.ReplaceAll(p, ".", "_"))
				keys = append(keys, envKey{path: p, name: name, index: idx})
			}
		}
	}
	walk(reflect.TypeFor[Config](), "", nil)
	return keys
}

// EnvVars returns the name of every environment variable Parse reads, in
// the order of the YAML keys.
func EnvVars() []string {
	keys := envKeys()
	names := make([]string, len(keys))
	for i, k := range keys {
		names[i] = k.name
	}
	return names
}

// applyEnv overrides cfg with every non-empty FAIRQ_ variable and returns
// the paths of the keys it set.
func applyEnv(p *problems, getenv func(string) string, cfg *Config) []string {
	root := reflect.ValueOf(cfg).Elem()
	var set []string
	for _, k := range envKeys() {
		s := getenv(k.name)
		if s == "" {
			continue
		}
		v := root.FieldByIndex(k.index)
		if err := setScalar(v, s); err != nil {
			p.add(k.name, 0, "%v", err)
			continue
		}
		set = append(set, k.path)
	}
	return set
}

// setScalar parses s into v, allocating v when it is a pointer.
func setScalar(v reflect.Value, s string) error {
	if v.Kind() == reflect.Pointer {
		e := reflect.New(v.Type().Elem())
		if err := setScalar(e.Elem(), s); err != nil {
			return err
		}
		v.Set(e)
		return nil
	}
	switch {
	case v.Type() == durationType || v.Type() == configDurationType:
		d, err := time.ParseDuration(s)
		if err != nil {
			return fmt.Errorf("invalid duration %q: want a Go duration such as 30s or 5m", s)
		}
		v.SetInt(int64(d))
	case v.Kind() == reflect.String:
		v.SetString(s)
	case v.Kind() == reflect.Slice && v.Type().Elem().Kind() == reflect.String:
		var items []string
		for _, item := range strings.Split(s, ",") {
			if item = strings.TrimSpace(item); item != "" {
				items = append(items, item)
			}
		}
		v.Set(reflect.ValueOf(items))
	case v.Kind() == reflect.Bool:
		b, err := strconv.ParseBool(s)
		if err != nil {
			return fmt.Errorf("invalid boolean %q: want true or false", s)
		}
		v.SetBool(b)
	case v.Kind() == reflect.Int:
		i, err := strconv.ParseInt(s, 10, strconv.IntSize)
		if err != nil {
			return fmt.Errorf("invalid integer %q", s)
		}
		v.SetInt(i)
	case v.Kind() == reflect.Float64:
		f, err := strconv.ParseFloat(s, 64)
		if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
			return fmt.Errorf("invalid number %q", s)
		}
		v.SetFloat(f)
	default:
		panic("config: no environment parser for " + v.Type().String())
	}
	return nil
}

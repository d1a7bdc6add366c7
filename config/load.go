package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"reflect"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/fairq/fairq/tenant"
)

// Load reads the YAML file at path (none when path is ""), applies the
// environment read through getenv (none when getenv is nil) and validates
// the result. See Parse.
func Load(path string, getenv func(string) string) (Config, error) {
	var data []byte
	if path != "" {
		var err error
		if data, err = os.ReadFile(path); err != nil {
			return Config{}, fmt.Errorf("config: %w", err)
		}
	}
	cfg, err := Parse(data, getenv)
	if err != nil && path != "" {
		return Config{}, fmt.Errorf("config %s: %w", path, err)
	}
	return cfg, err
}

// Parse builds a Config from Default, then the YAML document data (which
// may be empty), then the FAIRQ_ variables read through getenv (none when
// getenv is nil), and validates it. The error joins every problem found,
// each a *KeyError matching ErrInvalid; when the file or the environment
// has problems, the validation rules are not checked.
func Parse(data []byte, getenv func(string) string) (Config, error) {
	cfg := Default()
	var p problems
	lines, err := decodeFile(&p, data, &cfg)
	if err != nil {
		return Config{}, err
	}
	if getenv != nil {
		for _, path := range applyEnv(&p, getenv, &cfg) {
			delete(lines, path) // the file's line no longer holds the value
		}
	}
	if len(p) > 0 {
		return Config{}, p.err()
	}
	if len(cfg.Redis.Addrs) == 0 {
		cfg.Redis.Addrs = nil // "addrs: []" is the default, none
	}
	if err := cfg.Validate(); err != nil {
		addLines(err, lines)
		return Config{}, err
	}
	return cfg, nil
}

// addLines gives each KeyError of err the line of its key in the file,
// when the file set it.
func addLines(err error, lines map[string]int) {
	errs := []error{err}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		errs = j.Unwrap()
	}
	for _, e := range errs {
		if ke := (*KeyError)(nil); errors.As(e, &ke) && ke.Line == 0 {
			ke.Line = lines[ke.Key]
		}
	}
}

// maxNodes bounds the YAML nodes visited, so that aliases cannot make a
// small file expand into a huge walk.
const maxNodes = 100_000

// maxMergeDepth bounds nested merge keys, so that a mapping merging itself
// through an anchor ends.
const maxMergeDepth = 16

// decodeFile decodes data over cfg and returns the line of each key path
// it set. A YAML syntax error is returned; problems with keys and values
// are added to p.
func decodeFile(p *problems, data []byte, cfg *Config) (map[string]int, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	switch err := dec.Decode(&doc); {
	case errors.Is(err, io.EOF):
		return nil, nil // empty file, or comments only
	case err != nil:
		return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
		}
		return nil, fmt.Errorf("%w: line %d: a second YAML document; the file must hold one", ErrInvalid, extra.Line)
	}
	root := &doc
	if root.Kind == yaml.DocumentNode && len(root.Content) == 1 {
		root = root.Content[0]
	}
	w := walker{p: p, lines: map[string]int{}}
	w.value(root, reflect.ValueOf(cfg).Elem(), "")
	return w.lines, nil
}

// walker decodes a yaml.Node into a Config by reflection over the yaml
// struct tags. It stands in for yaml's own decoder (with KnownFields) to
// name the full path of a bad key in every message, to parse durations
// with time.ParseDuration, and to report every problem instead of the
// first.
type walker struct {
	p     *problems
	nodes int            // visited, against maxNodes
	lines map[string]int // key path → line, for the messages of Validate
}

// spend counts one node visit and reports whether the walk may go on; the
// first refusal is reported as a problem.
func (w *walker) spend(n *yaml.Node, path string) bool {
	w.nodes++
	if w.nodes == maxNodes+1 {
		w.p.add(displayPath(path), n.Line, "the document expands to more than %d nodes through aliases", maxNodes)
	}
	return w.nodes <= maxNodes
}

var (
	durationType       = reflect.TypeFor[time.Duration]()
	configDurationType = reflect.TypeFor[tenant.Duration]()
)

// value decodes n into v; path names v in messages ("" is the root).
func (w *walker) value(n *yaml.Node, v reflect.Value, path string) {
	if !w.spend(n, path) {
		return
	}
	for n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	if isNull(n) {
		return // a key with no value keeps its default
	}
	t := v.Type()
	switch {
	case t == durationType || t == configDurationType:
		if n.Kind != yaml.ScalarNode {
			w.p.add(displayPath(path), n.Line, "want a duration such as 30s, got %s", kindName(n))
			return
		}
		d, err := time.ParseDuration(n.Value)
		if err != nil {
			w.p.add(displayPath(path), n.Line, "invalid duration %q: want a Go duration such as 30s or 5m", n.Value)
			return
		}
		v.SetInt(int64(d))
	case t.Kind() == reflect.Struct:
		w.mapping(n, v, path)
	case t.Kind() == reflect.Slice:
		if n.Kind != yaml.SequenceNode {
			w.p.add(displayPath(path), n.Line, "want a list, got %s", kindName(n))
			return
		}
		s := reflect.MakeSlice(t, len(n.Content), len(n.Content))
		for i, item := range n.Content {
			ipath := fmt.Sprintf("%s[%d]", path, i)
			w.lines[ipath] = item.Line
			w.value(item, s.Index(i), ipath)
		}
		v.Set(s)
	case t.Kind() == reflect.Pointer:
		e := reflect.New(t.Elem())
		before := len(*w.p)
		w.value(n, e.Elem(), path)
		if len(*w.p) == before {
			v.Set(e)
		}
	default:
		if n.Kind != yaml.ScalarNode {
			w.p.add(displayPath(path), n.Line, "want %s, got %s", typeName(t), kindName(n))
			return
		}
		// yaml would truncate 1.5 into an int; a count must be written
		// as an integer.
		integral := t.Kind() != reflect.Int || n.ShortTag() == "!!int"
		e := reflect.New(t)
		if err := n.Decode(e.Interface()); err != nil || !integral {
			w.p.add(displayPath(path), n.Line, "invalid %s %q", typeName(t), n.Value)
			return
		}
		v.Set(e.Elem())
	}
}

// entry is one key of a mapping and its value.
type entry struct{ key, value *yaml.Node }

// mapping decodes the mapping n into the struct v.
func (w *walker) mapping(n *yaml.Node, v reflect.Value, path string) {
	if n.Kind != yaml.MappingNode {
		w.p.add(displayPath(path), n.Line, "want a mapping of keys, got %s", kindName(n))
		return
	}
	fields := fieldsOf(v.Type())
	seen := map[string]int{} // key → line, of keys written in n itself
	for _, e := range w.entries(n, path, 0) {
		if e.key.Kind != yaml.ScalarNode {
			w.p.add(displayPath(path), e.key.Line, "keys must be plain names, got %s", kindName(e.key))
			continue
		}
		name := e.key.Value
		key := joinPath(path, name)
		if first, dup := seen[name]; dup {
			w.p.add(key, e.key.Line, "key repeated (first at line %d)", first)
			continue
		}
		seen[name] = e.key.Line
		idx, ok := fields[name]
		if !ok {
			w.p.add(key, e.key.Line, "unknown key")
			continue
		}
		w.lines[key] = e.key.Line
		w.value(e.value, v.FieldByIndex(idx), key)
	}
}

// entries returns the keys of the mapping n: the keys of the mappings it
// merges ("<<: *anchor") first, so that the keys written in n, which come
// last, override them. A merged key that appears again is dropped instead
// of reported: overriding is what a merge is for.
func (w *walker) entries(n *yaml.Node, path string, depth int) []entry {
	var own, merged []entry
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, val := n.Content[i], n.Content[i+1]
		if !isMerge(k) {
			own = append(own, entry{k, val})
			continue
		}
		if depth >= maxMergeDepth {
			w.p.add(joinPath(path, "<<"), k.Line, "merges nested deeper than %d", maxMergeDepth)
			continue
		}
		for val.Kind == yaml.AliasNode {
			val = val.Alias
		}
		sources := []*yaml.Node{val}
		if val.Kind == yaml.SequenceNode {
			sources = val.Content
		}
		for _, s := range sources {
			for s.Kind == yaml.AliasNode {
				s = s.Alias
			}
			if !w.spend(s, path) {
				return nil
			}
			if s.Kind != yaml.MappingNode {
				w.p.add(joinPath(path, "<<"), k.Line, "can merge only mappings, got %s", kindName(s))
				continue
			}
			merged = append(merged, w.entries(s, path, depth+1)...)
		}
	}
	// Keep one entry per key: an own key wins over a merged one, and among
	// merged keys the first mapping listed wins, as YAML's merge key says.
	written := map[string]bool{}
	for _, e := range own {
		written[e.key.Value] = true
	}
	var out []entry
	for _, e := range merged {
		if !written[e.key.Value] {
			written[e.key.Value] = true
			out = append(out, e)
		}
	}
	return append(out, own...)
}

// field is one key of a struct type.
type field struct {
	name  string
	index []int // for reflect.Value.FieldByIndex
	typ   reflect.Type
}

// keysOf lists the yaml keys of struct type t in declaration order,
// including those of inline structs.
func keysOf(t reflect.Type) []field {
	var out []field
	for i := range t.NumField() {
		f := t.Field(i)
		name, inline, ok := yamlKey(f)
		switch {
		case !ok:
		case inline:
			for _, g := range keysOf(f.Type) {
				g.index = append([]int{i}, g.index...)
				out = append(out, g)
			}
		default:
			out = append(out, field{name: name, index: []int{i}, typ: f.Type})
		}
	}
	return out
}

// fieldsOf maps the yaml keys of struct type t to their field indexes.
func fieldsOf(t reflect.Type) map[string][]int {
	fields := map[string][]int{}
	for _, f := range keysOf(t) {
		fields[f.name] = f.index
	}
	return fields
}

// yamlKey returns the key of a struct field from its yaml tag, whether the
// field is inlined, and false for fields that take no part in YAML.
func yamlKey(f reflect.StructField) (name string, inline, ok bool) {
	tag, hasTag := f.Tag.Lookup("yaml")
	if !f.IsExported() || tag == "-" {
		return "", false, false
	}
	name, opts, _ := strings.Cut(tag, ",")
	for o := range strings.SplitSeq(opts, ",") {
		if o == "inline" {
			return "", true, true
		}
	}
	if name == "" || !hasTag {
		name = strings.ToLower(f.Name)
	}
	return name, false, true
}

func isNull(n *yaml.Node) bool {
	return n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null"
}

func isMerge(n *yaml.Node) bool {
	return n.Kind == yaml.ScalarNode && n.Value == "<<" && n.ShortTag() == "!!merge"
}

// kindName describes what a node holds, for messages. It never quotes a
// value: a raw API key written where a list of hashes belongs must not
// reach the logs.
func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		switch n.ShortTag() {
		case "!!int":
			return "an integer"
		case "!!float":
			return "a number"
		case "!!bool":
			return "a boolean"
		default:
			return "a single value"
		}
	default:
		return "a document"
	}
}

// typeName describes a Go scalar type, for messages.
func typeName(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Bool:
		return "boolean (true or false)"
	case reflect.Int:
		return "integer"
	case reflect.Float64:
		return "number"
	default:
		return t.Kind().String()
	}
}

func joinPath(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// displayPath names the root "(root)" in messages.
func displayPath(path string) string {
	if path == "" {
		return "(root)"
	}
	return path
}

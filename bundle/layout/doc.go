// Package layout is the bundle's per-file format: the paths of the files a
// bundle holds and the records written to them as JSON (one file
// per collector). Collectors write with these types and names; analyze,
// report and diff read with them, so a renamed file or field is a
// compile error in every reader rather than a reader that silently finds
// nothing.
//
// layout is a leaf: it imports only the standard library and procfs (pure
// parsers, themselves standard library only, whose Mount and LineError are
// part of the mounts record). It must never import the collection engine
// (collectors, isolate, supervisor), so that a reader of bundles does not
// link it; analyze's TestDependencies enforces that for the analyzer.
package layout

// The library's old module name, kept for one release (issue 34). The
// product has always been `EventBus`; its module is now named the same, so
// `import EventBus` is what a program writes. `import EventBusClient` still
// compiles, re-exporting the `EventBus` module unchanged, and will be removed
// in the release after next: replace it with `import EventBus`.
//
// Before editing: nothing but the re-export belongs here. (A module cannot be
// marked deprecated in Swift, and a `#warning` here would warn in every build
// of the package, including this one's; the deprecation is in docs/CLIENT.md
// and the release notes.)
@_exported import EventBus

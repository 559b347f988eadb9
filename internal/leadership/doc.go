// Package leadership holds what the election and versiongate packages
// share without importing each other: the one leadership-lost sentinel, so
// that errors.Is matches it whichever package returned it.
//
// The term interface is not here: election.Leadership and versiongate.Term
// are aliases of identical interface type literals, one type to the
// compiler, spelled in each public package so that go doc shows its
// methods there (go doc shows no methods through an alias of a type
// defined elsewhere). A test of this package holds the two identical.
package leadership

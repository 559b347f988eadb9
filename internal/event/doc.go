// Package event provides a watchable value: one writer publishes the newest
// state, any number of watchers receive it without ever missing the latest.
package event

// Package promreg holds what the prommetrics packages share: the
// registration of collectors that hooks of different names reuse, the
// label and namespace conventions, and the buckets. It imports no package
// of reconkit, so each prommetrics subpackage compiles only the package it
// hooks.
package promreg

// Package filewatch tells subscribers that a file may have changed, with one inotify instance
// for the whole process however many files it follows.
package filewatch

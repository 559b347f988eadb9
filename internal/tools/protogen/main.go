// Command protogen generates Go code from .proto files without protoc: it
// compiles the schema with github.com/bufbuild/protocompile and runs the
// code generator of protoc-gen-go (the version pinned in this module's
// go.mod) in process, so `go generate` is the only command needed.
//
//	go run . -I <import dir> -o <output dir> [-p paths=source_relative] file.proto...
//
// Output paths follow protoc-gen-go's rules for the given parameter
// (default paths=source_relative), relative to -o.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/bufbuild/protocompile"
	gengo "google.golang.org/protobuf/cmd/protoc-gen-go/internal_gengo"
	"google.golang.org/protobuf/compiler/protogen"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/pluginpb"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "protogen:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("protogen", flag.ContinueOnError)
	importDir := fs.String("I", ".", "import directory the .proto files are relative to")
	outDir := fs.String("o", ".", "output directory")
	param := fs.String("p", "paths=source_relative", "protoc-gen-go parameter")
	if err := fs.Parse(args); err != nil {
		return err
	}
	files := fs.Args()
	if len(files) == 0 {
		return errors.New("no .proto files given")
	}

	compiler := protocompile.Compiler{
		Resolver: protocompile.WithStandardImports(&protocompile.SourceResolver{
			ImportPaths: []string{*importDir},
		}),
		SourceInfoMode: protocompile.SourceInfoStandard,
	}
	compiled, err := compiler.Compile(context.Background(), files...)
	if err != nil {
		return fmt.Errorf("compile: %w", err)
	}

	// The request lists every file with its dependencies first, as protoc
	// does.
	req := &pluginpb.CodeGeneratorRequest{
		FileToGenerate: files,
		Parameter:      proto.String(*param),
	}
	seen := map[string]bool{}
	var add func(fd protoreflect.FileDescriptor)
	add = func(fd protoreflect.FileDescriptor) {
		if seen[fd.Path()] {
			return
		}
		seen[fd.Path()] = true
		imports := fd.Imports()
		for i := 0; i < imports.Len(); i++ {
			add(imports.Get(i).FileDescriptor)
		}
		req.ProtoFile = append(req.ProtoFile, protodesc.ToFileDescriptorProto(fd))
	}
	for _, f := range compiled {
		add(f)
	}
	// protoc strips source info from dependencies that are not generated;
	// do the same so the output does not depend on them.
	generate := map[string]bool{}
	for _, f := range files {
		generate[f] = true
	}
	for _, fdp := range req.ProtoFile {
		if !generate[fdp.GetName()] {
			fdp.SourceCodeInfo = nil
		}
	}

	gen, err := protogen.Options{}.New(req)
	if err != nil {
		return fmt.Errorf("protoc-gen-go: %w", err)
	}
	for _, f := range gen.Files {
		if f.Generate {
			gengo.GenerateFile(gen, f)
		}
	}
	gen.SupportedFeatures = gengo.SupportedFeatures
	gen.SupportedEditionsMinimum = gengo.SupportedEditionsMinimum
	gen.SupportedEditionsMaximum = gengo.SupportedEditionsMaximum
	resp := gen.Response()
	if resp.Error != nil {
		return fmt.Errorf("protoc-gen-go: %s", resp.GetError())
	}
	for _, out := range resp.File {
		path := filepath.Join(*outDir, filepath.FromSlash(out.GetName()))
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(path, []byte(out.GetContent()), 0o644); err != nil {
			return err
		}
	}
	return nil
}

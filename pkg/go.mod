module github.com/moraine-data/moraine/pkg

go 1.26

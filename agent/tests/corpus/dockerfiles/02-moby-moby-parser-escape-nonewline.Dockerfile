# escape = ``
# There is no white space line after the directives. This still succeeds, but goes
# against best practices.
FROM image
MAINTAINER foo@bar.com
ENV GOPATH `
\go
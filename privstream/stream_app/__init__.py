"""The service: settings, the faust app, topics, web pages, the CLI, the embedded broker."""

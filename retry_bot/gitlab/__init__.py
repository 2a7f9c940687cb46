"""GitLab access for the retry bot: the live client helpers and a loopback GitLab stand-in (``standin``)."""

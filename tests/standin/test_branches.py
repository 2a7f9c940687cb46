"""GET /projects/:id/repository/branches/:branch through python-gitlab."""

import gitlab
import pytest

from standin.gitlab import StandIn


def test_branch_head_moves_with_a_push_that_creates_no_pipeline():
    with StandIn() as s:
        s.add_project("grp/app", {"build": {"script": ["true"]}})
        gl = gitlab.Gitlab(s.url, private_token=s.token)
        project = gl.projects.get("grp/app")
        first = project.branches.get("main").commit["id"]
        second = s.set_ci_config("grp/app", {"build": {"script": ["make"]}})
        assert first != second and project.branches.get("main").commit["id"] == second
        with pytest.raises(gitlab.GitlabGetError) as exc:
            project.branches.get("nope")
        assert exc.value.response_code == 404

"""The templates keep one attribute per line (devtools/templatefmt.py, ``python manage.py
formattemplates``): no start tag over 100 characters on one line, no line over 200; and the
formatter changes only the white space inside start tags, never what a page says."""

from __future__ import annotations

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.template import Context, Engine

from devtools.templatefmt import format_template
from tests.support.htmltext import flat

LONG_VALUE = "x" * 90


def test_the_templates_are_formatted_and_no_line_is_over_200_characters():
    call_command("formattemplates", "--check")


def test_the_check_fails_on_a_long_tag_and_on_a_long_line(tmp_path):
    long_tag = tmp_path / "tag.html"
    long_tag.write_text(f'<div id="a" class="{LONG_VALUE}">text</div>\n')
    with pytest.raises(CommandError):
        call_command("formattemplates", "--check", str(long_tag))
    long_line = tmp_path / "line.html"
    long_line.write_text("<p>" + "word " * 60 + "</p>\n")
    with pytest.raises(CommandError):
        call_command("formattemplates", "--check", str(long_line))
    call_command("formattemplates", str(long_tag))
    call_command("formattemplates", "--check", str(long_tag))


def test_a_long_tag_goes_one_attribute_per_line_under_it_and_stays_so():
    source = (
        f'  {{% if on %}}<input name="note" value="{{{{ v|default:\'\' }}}}" class="{LONG_VALUE}"'
        '{% if bad %} aria-invalid="true"{% endif %}>{% endif %}\n'
    )
    result = format_template(source).text
    assert result == (
        "  {% if on %}<input\n"
        '      name="note"\n'
        "      value=\"{{ v|default:'' }}\"\n"
        f'      class="{LONG_VALUE}"\n'
        '      {% if bad %} aria-invalid="true"{% endif %}>{% endif %}\n'
    )
    assert format_template(result).text == result


def test_a_condition_completing_an_attribute_stays_with_it():
    source = f'<hx-upsert hx-target="#{LONG_VALUE}" key="data-sort" sort{{% if d %}}="desc"{{% endif %}}>'
    assert format_template(source).text.endswith('\n    sort{% if d %}="desc"{% endif %}>')


def test_text_pre_comments_and_short_tags_are_left_as_written():
    source = (
        f'{{% partialdef x %}}<pre><code class="{LONG_VALUE}" data-a="1">  kept  </code></pre>'
        f'<!-- <div class="{LONG_VALUE}" id="c"> -->'
        f'{{# <div class="{LONG_VALUE}" id="d"> #}}<b>short</b>   text{{% endpartialdef %}}'
    )
    assert format_template(source).text == source


def test_a_tag_it_cannot_read_is_left_and_named():
    source = f'<div class="{LONG_VALUE}" {{% if a %}}>{{% else %}} x>{{% endif %}}'
    result = format_template(source)
    assert result.text == source
    assert result.skipped and result.skipped[0][0] == 1


@pytest.mark.parametrize("oob", [True, False])
def test_formatted_and_written_render_the_same_page(oob):
    source = (
        '{% for n in numbers %}<span id="page-{{ n }}" class="column-page" data-page-of="{{ n }}" '
        'data-numbers="{% for m in numbers %}{{ m }}{% if not forloop.last %} {% endif %}{% endfor %}" '
        'hidden{% if oob %} hx-swap-oob="true"{% endif %}></span>{% endfor %}'
    )
    formatted = format_template(source).text
    assert formatted != source
    engine = Engine()
    context = {"numbers": [1, 2], "oob": oob}
    written = engine.from_string(source).render(Context(context))
    rewritten = engine.from_string(formatted).render(Context(context))
    assert flat(rewritten) == flat(written)
